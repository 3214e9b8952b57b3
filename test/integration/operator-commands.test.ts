// Needs real kube-apiserver (+ etcd): operator RBAC and admission as docs/rbac.md grants them.
// The operator actions `fastfence pause`, `resume` and `fence` (and release-slot's Event) on
// a real kube-apiserver with the shipped CRDs, RBAC and admission policies, run in-process
// through cli/main.ts main() as real people: alice and bob hold exactly the operator RBAC
// that docs/rbac.md prints (applied from its operator-rbac block), the admin is the
// cluster's admin, node-b is a kubelet identity (system:node:node-b in system:nodes).
// pause/resume toggle the FencingPolicy (created when missing) and a Node's annotation,
// idempotently, each change with its Event; fence creates the NodeFence in the requester's
// own name, a repeat writes nothing, an open incident nobody asked for gets the request, an
// ended one is refused; the API server refuses a request from a fastfence stage and one in
// someone else's name, and a node's own pause annotation; `fence --wait` with no stage
// running times out (exit 4) with progress. No stage runs here: the pipeline is tested elsewhere.
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  loadAllYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { readFileSync, writeFileSync } from "node:fs";
import { makeTempDir, removeTempDir } from "../../harness/env/registry.ts";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../cli/exit-codes.ts";
import {
  emptyStatus,
  incidentName,
  newIncident,
  RELEASE_SLOT_ANNOTATION,
  transition,
  type NodeFence,
} from "../../core/incident.ts";
import { PAUSE_ANNOTATION } from "../../core/planned.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT, sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { kwokNodeObject } from "../../harness/kube/node.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { fastfence } from "../unit/cli/cli-helpers.ts";

const BOOT = {
  "node-b": "b0000000-bbbb",
  "node-c": "c0000000-cccc",
  "node-d": "d0000000-dddd",
  "node-e": "e0000000-eeee",
};
const NODES = Object.keys(BOOT) as (keyof typeof BOOT)[];
const G = { group: "fastfence.io", version: "v1alpha1", plural: "nodefences", namespace: NS };
const at = () => new Date().toISOString();
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** The operator RBAC of docs/rbac.md, exactly as printed there. */
function operatorRbacFromDocs(): KubernetesObject[] {
  const doc = readFileSync(join(ROOT, "docs/rbac.md"), "utf8");
  const m = /<!-- operator-rbac:begin -->\s*```yaml\n([\s\S]*?)```\s*<!-- operator-rbac:end -->/.exec(doc);
  if (!m) throw new Error("docs/rbac.md: no operator-rbac block");
  return (loadAllYaml(m[1]!) as KubernetesObject[]).filter((o) => o?.kind);
}

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [...shippedAccessControl(), ...operatorRbacFromDocs()]);
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of NODES) {
    await core.createNode({ body: kwokNodeObject(name, BOOT[name]) });
    const n = await core.readNode({ name });
    n.status = { ...n.status, nodeInfo: { ...n.status!.nodeInfo!, bootID: BOOT[name] } };
    await core.replaceNodeStatus({ name, body: n });
  }
  const dir = makeTempDir("operator");
  scope.add({ stop: async () => removeTempDir(dir) });
  const saPath = async (stage: string) => {
    const skc = await serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount: `fastfence-${stage}` });
    const path = join(dir, `${stage}.kubeconfig`);
    writeFileSync(path, skc.exportConfig());
    return { path, kube: new Kube(skc, { requestTimeoutMs: 5000 }) };
  };
  const paths = {
    admin: cp.kubeconfigPath,
    alice: await cp.makeUserKubeconfig("alice", ["sre-oncall"]),
    bob: await cp.makeUserKubeconfig("bob", ["sre-oncall"]),
    nodeB: await cp.makeUserKubeconfig("system:node:node-b", ["system:nodes"]),
  };
  const kubeOf = (path: string) => {
    const k = new KubeConfig();
    k.loadFromFile(path);
    return new Kube(k, { requestTimeoutMs: 5000 });
  };
  const stages = {
    confirm: await saPath("confirm"),
    fence: await saPath("fence"),
    recover: await saPath("recover"),
  };
  await sleep(2000); // the admission policies' type checking and the bindings settle in the apiserver
  return {
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    paths,
    stages,
    alice: kubeOf(paths.alice),
    nodeB: kubeOf(paths.nodeB),
  };
});

type Who = "admin" | "alice" | "bob" | { path: string };
const run = (who: Who, ...argv: string[]) =>
  fastfence(argv, {
    KUBECONFIG: typeof who === "string" ? env().paths[who] : who.path,
    FASTFENCE_NAMESPACE: NS,
  });

async function events(namespace: string, kind: string, name: string, reason: string) {
  const l = await env().core.listNamespacedEvent({
    namespace,
    fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name},reason=${reason}`,
  });
  return l.items;
}

async function policySpec(): Promise<Record<string, unknown>> {
  const p = (await env().custom.getClusterCustomObject({
    group: "fastfence.io",
    version: "v1alpha1",
    plural: "fencingpolicies",
    name: "default",
  })) as { spec: Record<string, unknown> };
  return p.spec;
}

const annotation = async (node: string) =>
  (await env().core.readNode({ name: node })).metadata?.annotations?.[PAUSE_ANNOTATION];

const getIncident = async (name: string) =>
  (await env().custom.getNamespacedCustomObject({ ...G, name })) as NodeFence;

async function denied(p: Promise<unknown>): Promise<KubeApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KubeApiError);
  expect([403, 422]).toContain((err as KubeApiError).status);
  return err as KubeApiError;
}

describe("fastfence pause / resume", () => {
  it("cluster-wide: creates the missing FencingPolicy, toggles spec.paused, idempotent, with Events", async () => {
    const first = await run("alice", "pause", "--reason", "storage firmware, CHG-1");
    expect(first.status, first.stderr).toBe(EXIT.ok);
    expect(first.stdout).toContain("FencingPolicy default did not exist: created it");
    expect(await policySpec()).toMatchObject({ paused: true, pausedReason: "storage firmware, CHG-1" });

    const again = await run("alice", "pause", "--reason", "storage firmware, CHG-1", "-o", "json");
    expect(again.status, again.stderr).toBe(EXIT.ok);
    expect(JSON.parse(again.stdout)).toMatchObject({
      scope: "cluster",
      changed: false,
      paused: true,
      by: "alice",
    });
    expect(JSON.parse(again.stdout).message).toContain("already paused");

    const resumed = await run("alice", "resume", "--reason", "CHG-1 done", "-o", "json");
    expect(resumed.status, resumed.stderr).toBe(EXIT.ok);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ changed: true, paused: false, createdPolicy: false });
    const spec = await policySpec();
    expect(spec.paused).toBe(false);
    expect(spec).not.toHaveProperty("pausedReason");
    const noop = await run("alice", "resume");
    expect(noop.status).toBe(EXIT.ok);
    expect(noop.stdout).toBe("fencing was not paused cluster-wide; nothing changed\n");

    const paused = await events("default", "FencingPolicy", "default", "FencingPaused");
    expect(paused).toHaveLength(1);
    expect(paused[0]).toMatchObject({ type: "Warning", reportingComponent: "fastfence.io/cli" });
    expect(paused[0]!.message).toBe("fencing paused cluster-wide by alice: storage firmware, CHG-1");
    const res = await events("default", "FencingPolicy", "default", "FencingResumed");
    expect(res).toHaveLength(1);
    expect(res[0]!.message).toBe(
      "fencing resumed cluster-wide by alice: CHG-1 done (paused for: storage firmware, CHG-1)",
    );
  });

  it("--reason is required for pause, before anything is written", async () => {
    const r = await run("alice", "pause", "node-c");
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain("--reason is required");
    expect(await annotation("node-c")).toBeUndefined();
  });

  it("one node: toggles its annotation, idempotent, with Events; an unknown node is exit 3", async () => {
    const r = await run("alice", "pause", "node-c", "--reason", "BIOS update");
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(r.stdout).toBe("fencing of node-c paused: BIOS update\n");
    expect(await annotation("node-c")).toBe("BIOS update");
    expect((await run("alice", "pause", "node-c", "--reason", "BIOS update")).stdout).toContain(
      "already paused",
    );

    const missing = await run("alice", "pause", "no-such-node", "--reason", "x");
    expect(missing.status).toBe(EXIT.notFound);
    expect(missing.stderr).toContain("no node no-such-node");

    const res = await run("alice", "resume", "node-c");
    expect(res.status, res.stderr).toBe(EXIT.ok);
    expect(res.stdout).toContain("fencing of node-c resumed (reason was: BIOS update)");
    expect(await annotation("node-c")).toBeUndefined();
    expect((await run("alice", "resume", "node-c")).stdout).toContain("was not paused");

    const p = await events("default", "Node", "node-c", "NodeFencingPaused");
    expect(p.map((e) => e.message)).toEqual(["fencing of node-c paused by alice: BIOS update"]);
    expect(await events("default", "Node", "node-c", "NodeFencingResumed")).toHaveLength(1);
  });

  it("a node cannot set or remove its own pause annotation; an admin can", async () => {
    const patch = (value: string | null, key = PAUSE_ANNOTATION) =>
      env().nodeB.call("patch own node", (a) =>
        a.core.patchNode({ name: "node-b", body: { metadata: { annotations: { [key]: value } } } }, merge),
      );
    // The node may write its own Node object: other annotations pass.
    await patch("y", "example.com/other");
    const set = await denied(patch("never fence me"));
    expect(set.message).toContain(
      "may not set, change or remove its own fastfence.io/paused annotation (system:node:node-b)",
    );

    const admin = await run("admin", "pause", "node-b", "--reason", "admin: PSU swap");
    expect(admin.status, admin.stderr).toBe(EXIT.ok);
    expect(await annotation("node-b")).toBe("admin: PSU swap");
    await denied(patch(null));
    expect(await annotation("node-b")).toBe("admin: PSU swap");
    expect((await run("admin", "resume", "node-b")).status).toBe(EXIT.ok);
    expect(await annotation("node-b")).toBeUndefined();
  });
});

// In the order written, also under --sequence.shuffle: the incidents the first cases create
// (node-b's request by alice, node-c's and node-d's) are the ones the later cases try to
// change or withdraw, and node-e has no incident until the --wait case creates it.
describe("fastfence fence", { shuffle: false }, () => {
  const nameB = incidentName("node-b", BOOT["node-b"]);

  it("creates the NodeFence in the requester's own name, with Events; a repeat writes nothing", async () => {
    const r = await run("alice", "fence", "node-b", "--reason", "NIC flapping (INC-1)", "-o", "json");
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(JSON.parse(r.stdout)).toMatchObject({
      node: "node-b",
      bootId: BOOT["node-b"],
      incident: nameB,
      namespace: NS,
      action: "created",
      requestedBy: "alice",
      request: { by: "alice", reason: "NIC flapping (INC-1)" },
    });
    const inc = await getIncident(nameB);
    expect(inc.spec).toMatchObject({ nodeName: "node-b", bootId: BOOT["node-b"] });
    expect(inc.spec.operatorRequest).toMatchObject({ by: "alice", reason: "NIC flapping (INC-1)" });
    expect(inc.metadata.labels).toEqual(newIncident("node-b", BOOT["node-b"], emptyStatus()).metadata.labels);
    expect(inc.status).toBeUndefined();

    const again = await run("alice", "fence", "node-b", "--reason", "NIC flapping (INC-1)");
    expect(again.status, again.stderr).toBe(EXIT.ok);
    expect(again.stdout).toContain("already requested by alice");
    const bob = await run("bob", "fence", "node-b", "--reason", "me too", "-o", "json");
    expect(bob.status, bob.stderr).toBe(EXIT.ok);
    expect(JSON.parse(bob.stdout)).toMatchObject({ action: "already-requested", request: { by: "alice" } });
    expect((await getIncident(nameB)).metadata.resourceVersion).toBe(inc.metadata.resourceVersion);

    for (const [ns, kind, name] of [
      [NS, "NodeFence", nameB],
      ["default", "Node", "node-b"],
    ] as const) {
      const e = await events(ns, kind, name, "OperatorFenceRequested");
      expect(e, `${kind} ${name}`).toHaveLength(1);
      expect(e[0]!.message).toBe(
        `alice requested fencing of node-b (boot ${BOOT["node-b"]}, incident ${nameB}): NIC flapping (INC-1)`,
      );
    }
  });

  it("adds the request to an open incident nobody asked for; refuses an ended one", async () => {
    const confirm = new IncidentStore(env().stages.confirm.kube, NS);
    const suspected = transition(emptyStatus(), "Suspected", at());
    const c = await confirm.create(newIncident("node-c", BOOT["node-c"], suspected));
    const r = await run("alice", "fence", "node-c", "--reason", "kernel oops loop", "-o", "json");
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(JSON.parse(r.stdout)).toMatchObject({ action: "requested", phase: "Suspected" });
    const after = await getIncident(c.metadata.name);
    expect(after.spec.operatorRequest).toMatchObject({ by: "alice", reason: "kernel oops loop" });
    expect(after.status).toMatchObject({ phase: "Suspected" });

    const d = await confirm.create(newIncident("node-d", BOOT["node-d"], suspected));
    const recover = new IncidentStore(env().stages.recover.kube, NS);
    await recover.writeStatus(
      d.metadata.name,
      d.metadata.resourceVersion!,
      transition(suspected, "Closed", at(), { reason: "NodeHealthy", message: "the node answers again" }),
    );
    const ended = await run("alice", "fence", "node-d", "--reason", "x");
    expect(ended.status).toBe(EXIT.failed);
    expect(ended.stderr).toMatch(/has ended: Closed \(NodeHealthy: the node answers again\)/);
    expect((await getIncident(d.metadata.name)).spec.operatorRequest).toBeUndefined();
  });

  it("an unknown node is exit 3", async () => {
    const r = await run("alice", "fence", "no-such-node", "--reason", "x");
    expect(r.status).toBe(EXIT.notFound);
    expect(r.stderr).toContain("no node no-such-node");
  });

  it("the API server refuses a request from a fastfence stage, shown as its policy's message", async () => {
    const r = await run(env().stages.confirm, "fence", "node-e", "--reason", "I am a stage");
    expect(r.status).toBe(EXIT.failed);
    expect(r.stderr).toMatch(/^fastfence fence node-e: denied by the API server \(HTTP 403\): /);
    expect(r.stderr).toContain("fastfence-operator-request");
    expect(r.stderr).toContain("no fastfence stage may request fencing");
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    await expect(getIncident(incidentName("node-e", BOOT["node-e"]))).rejects.toThrow();
  });

  it("a user cannot request fencing in someone else's name, nor change a request", async () => {
    const body = {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "NodeFence",
      metadata: { name: "node-e-forged" },
      spec: {
        nodeName: "node-e",
        bootId: BOOT["node-e"],
        operatorRequest: { by: "bob", reason: "x", at: at() },
      },
    };
    const forged = await denied(
      env().alice.call("create", (a) => a.custom.createNamespacedCustomObject({ ...G, body })),
    );
    expect(forged.message).toContain("spec.operatorRequest.by must be the requester's own user name (alice)");

    const changed = await denied(
      env().alice.call("change", (a) =>
        a.custom.patchNamespacedCustomObject(
          { ...G, name: nameB, body: { spec: { operatorRequest: { reason: "something else" } } } },
          merge,
        ),
      ),
    );
    expect(changed.message).toContain("spec.operatorRequest cannot be changed or removed once set");
  });

  it("--wait with no stage running times out (exit 4), printing the progress", async () => {
    const r = await run("alice", "fence", "node-e", "--reason", "wedged", "--wait", "3", "-o", "json");
    expect(r.status, r.stderr).toBe(EXIT.timeout);
    const name = incidentName("node-e", BOOT["node-e"]);
    expect(r.stderr).toContain(`+0.0s ${name}: Suspected (not taken up yet`);
    const out = JSON.parse(r.stdout) as {
      action: string;
      wait: { outcome: string; seconds: number; message: string };
    };
    expect(out.action).toBe("created");
    expect(out.wait).toMatchObject({
      outcome: "timeout",
      ok: false,
      steps: [{ phase: "Suspected", round: 0 }],
    });
    expect(out.wait.seconds).toBeGreaterThanOrEqual(3);
    expect(out.wait.message).toContain("no outcome within 3 s");
  });

  // On 6f7efbe there was no way for the operator role to withdraw a request: `--withdraw` did
  // not exist (exit 2) and removing spec.operatorRequest is refused by the policy (above).
  it("the documented operator role withdraws a request in its own name; nobody else's, no stage, never undone", async () => {
    const nameC = incidentName("node-c", BOOT["node-c"]);
    const r = await run(
      "bob",
      "fence",
      "node-c",
      "--withdraw",
      "--reason",
      "false alarm (INC-2)",
      "-o",
      "json",
    );
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(JSON.parse(r.stdout)).toMatchObject({
      action: "withdrawn",
      incident: nameC,
      withdrawal: { by: "bob", reason: "false alarm (INC-2)" },
      request: { by: "alice" },
    });
    const inc = await getIncident(nameC);
    expect(inc.spec.operatorWithdrawal).toMatchObject({ by: "bob", reason: "false alarm (INC-2)" });
    expect(inc.spec.operatorRequest).toMatchObject({ by: "alice", reason: "kernel oops loop" });
    const e = await events(NS, "NodeFence", nameC, "OperatorFenceWithdrawn");
    expect(e).toHaveLength(1);
    expect(e[0]!.message).toContain("bob withdrew the request by alice to fence node-c");

    const again = await run("alice", "fence", "node-c", "--withdraw", "--reason", "again", "-o", "json");
    expect(again.status, again.stderr).toBe(EXIT.ok);
    expect(JSON.parse(again.stdout)).toMatchObject({
      action: "already-withdrawn",
      withdrawal: { by: "bob" },
    });
    expect((await getIncident(nameC)).metadata.resourceVersion).toBe(inc.metadata.resourceVersion);

    const undo = await denied(
      env().alice.call("undo", (a) =>
        a.custom.patchNamespacedCustomObject(
          { ...G, name: nameC, body: { spec: { operatorWithdrawal: null } } },
          merge,
        ),
      ),
    );
    expect(undo.message).toContain("spec.operatorWithdrawal cannot be changed or removed once set");

    const nameB = incidentName("node-b", BOOT["node-b"]);
    const forged = await denied(
      env().alice.call("forge", (a) =>
        a.custom.patchNamespacedCustomObject(
          { ...G, name: nameB, body: { spec: { operatorWithdrawal: { by: "bob", reason: "x", at: at() } } } },
          merge,
        ),
      ),
    );
    expect(forged.message).toContain("its by must be the withdrawer's own user name (alice)");
    const stage = await run(
      env().stages.confirm,
      "fence",
      "node-b",
      "--withdraw",
      "--reason",
      "I am a stage",
    );
    expect(stage.status).toBe(EXIT.failed);
    expect(stage.stderr).toContain("no fastfence stage may withdraw a request");
    expect((await getIncident(nameB)).spec.operatorWithdrawal).toBeUndefined();

    const none = await run("alice", "fence", "node-d", "--withdraw", "--reason", "x");
    expect(none.status).toBe(EXIT.failed);
    expect(none.stderr).toContain("nothing to withdraw");
  });
});

describe("fastfence release-slot", () => {
  it("leaves the Event SlotReleaseRequested on the NodeFence", async () => {
    const { confirm, fence } = env().stages;
    const stores = { confirm: new IncidentStore(confirm.kube, NS), fence: new IncidentStore(fence.kube, NS) };
    const suspected = transition(emptyStatus(), "Suspected", at());
    const inc = await stores.confirm.create(newIncident("node-x", "boot-xxxx", suspected));
    const name = inc.metadata.name;
    const write = async (s: IncidentStore, st: Parameters<IncidentStore["writeStatus"]>[2]) =>
      s.writeStatus(name, (await s.get(name))!.metadata.resourceVersion!, st);
    const confirmed = transition(suspected, "Confirmed", at(), {
      confirmedBy: `system:serviceaccount:${NS}:fastfence-confirm`,
    });
    await write(stores.confirm, confirmed);
    const fencing = transition(confirmed, "Fencing", at(), { round: 1, fencingBy: "fence-0" });
    await write(stores.fence, fencing);
    await write(stores.fence, transition(fencing, "FenceFailed", at(), { reason: "PowerOffNotConfirmed" }));

    const why = "powered off by hand (T-9)";
    const r = await run("alice", "release-slot", name, "--reason", why, "--wait", "0");
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect((await getIncident(name)).metadata.annotations?.[RELEASE_SLOT_ANNOTATION]).toBe(why);
    const e = await events(NS, "NodeFence", name, "SlotReleaseRequested");
    expect(e).toHaveLength(1);
    expect(e[0]!.message).toContain("alice asked to end the final FenceFailed incident");
    expect(e[0]!.message).toContain(why);
  });
});
