// Needs real kube-apiserver, lab Redfish emulator: metal3's own CRDs, Secrets and namespaced RBAC.
// metal3 discovery on the real stack: a kube-apiserver with metal3's real BareMetalHost
// CRD and OpenShift's real Machine CRD, a host whose spec.bmc points at the lab Redfish
// emulator (plain HTTP) with its credentials Secret in the host's namespace, and Nodes
// linked through a Machine's status.nodeRef (to the host its metal3.io/BareMetalHost
// annotation names, or the host whose spec.consumerRef is that Machine), or not at all.
// What a node writes about itself (annotations, providerID) is ignored: a node annotated
// with another node's host and Machine gets no levels (issue 13). Checks: `fastfence bmc
// check|status|off|on --node` reads settings from the cluster; discovered levels resolve
// only when the FencingPolicy opts in; the power executor reads the Secret in the host's
// namespace, sets the reboot.metal3.io hold before the power-off and clears it when the
// incident ends; errors name what is missing; credentials never appear in any output.
// With FASTFENCE_METAL3_NAMESPACES, an identity holding only a namespaced Role (like the
// overlays grant fence and recover) lists and releases hosts without a cluster-wide list.
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { bmcCommand } from "../../cli/bmc.ts";
import type { View } from "../../core/decision.ts";
import { resolvePolicy, type ResolvedFencingLevel } from "../../core/policy.ts";
import { resolveLevels } from "../../core/policy-levels.ts";
import { discoveryInput } from "../../infra/bmc/discovery-input.ts";
import { KubeMetal3Api, rebootAnnotationKey, type BareMetalHostLike } from "../../infra/bmc/metal3.ts";
import { loadRuntimeConfig, metal3Namespaces } from "../../infra/config.ts";
import { BmcPowerExecutor } from "../../infra/fence/power.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { systemClock } from "../../core/clock.ts";
import { LabRedfishServer } from "../../harness/emulators/redfish/server.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT, THIRD_PARTY_CRDS } from "../../harness/env/index.ts";
import { sharedControlPlane, type SharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const HOST_NS = "metal3";
const FF_NS = "fastfence-system";
const USER = "metal3-admin";
const PASS = `Pw-${Math.random().toString(36).slice(2)}-metal3`;
const BMH = { group: "metal3.io", version: "v1alpha1", plural: "baremetalhosts" };

interface Env {
  cp: SharedControlPlane;
  kc: KubeConfig;
  kubeconfigPath: string;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  kube: Kube;
  bmc: LabRedfishServer;
  /** reboot.metal3.io annotations of the host at the moment ForceOff reached the BMC. */
  annotationsAtOff: Record<string, string>[];
}

const env = withEnv<Env>(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...readManifests(join(THIRD_PARTY_CRDS, "metal3.io")),
    ...readManifests(join(THIRD_PARTY_CRDS, "machine.openshift.io")),
    ...readManifests(join(ROOT, "knative/base/crds"), (o) => o.kind === "CustomResourceDefinition"),
  ]);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const name of [HOST_NS, FF_NS]) await core.createNamespace({ body: { metadata: { name } } });
  const annotationsAtOff: Record<string, string>[] = [];
  const readHostAnnotations = async () => {
    const h = (await custom.getNamespacedCustomObject({
      ...BMH,
      namespace: HOST_NS,
      name: "worker-0",
    })) as BareMetalHostLike;
    return Object.fromEntries(
      Object.entries(h.metadata?.annotations ?? {}).filter(([k]) => k.startsWith("reboot.metal3.io/")),
    );
  };
  const bmc = new LabRedfishServer({
    username: USER,
    password: PASS,
    systemId: "worker-0",
    sessions: true,
    hooks: { powerOff: async () => void annotationsAtOff.push(await readHostAnnotations()) },
  });
  await bmc.start();
  scope.add({ stop: () => bmc.stop() });

  const address = `redfish+http://127.0.0.1:${bmc.port}/redfish/v1/Systems/worker-0`;
  const secret = (name: string, data: Record<string, string>) =>
    core.createNamespacedSecret({ namespace: HOST_NS, body: { metadata: { name }, stringData: data } });
  await secret("worker-0-bmc", { username: USER, password: PASS });
  await secret("worker-1-bmc", { username: USER }); // no password key
  const MACHINE = {
    group: "machine.openshift.io",
    version: "v1beta1",
    plural: "machines",
    namespace: HOST_NS,
  };
  const host = (name: string, credentialsName: string, consumer?: string) =>
    custom.createNamespacedCustomObject({
      ...BMH,
      namespace: HOST_NS,
      body: {
        apiVersion: "metal3.io/v1alpha1",
        kind: "BareMetalHost",
        metadata: { name },
        spec: {
          online: true,
          bmc: { address, credentialsName, disableCertificateVerification: true },
          ...(consumer
            ? {
                consumerRef: {
                  apiVersion: "machine.openshift.io/v1beta1",
                  kind: "Machine",
                  name: consumer,
                  namespace: HOST_NS,
                },
              }
            : {}),
        },
      },
    });
  await host("worker-0", "worker-0-bmc", "worker-0-m");
  await host("worker-0b", "worker-0-bmc", "worker-0b-m"); // same BMC, found by consumerRef only
  await host("worker-1", "worker-1-bmc");
  await host("worker-2", "worker-2-bmc"); // its Secret does not exist
  const node = async (name: string, extra: { providerID?: string; annotations?: Record<string, string> }) =>
    core.createNode({
      body: {
        metadata: { name, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
        spec: extra.providerID ? { providerID: extra.providerID } : {},
      },
    });
  /** An OpenShift Machine linked to the node by status.nodeRef (as the machine controller writes it). */
  const machine = async (name: string, nodeName: string, hostName?: string) => {
    const n = await core.readNode({ name: nodeName });
    await custom.createNamespacedCustomObject({
      ...MACHINE,
      body: {
        apiVersion: "machine.openshift.io/v1beta1",
        kind: "Machine",
        metadata: {
          name,
          ...(hostName ? { annotations: { "metal3.io/BareMetalHost": `${HOST_NS}/${hostName}` } } : {}),
        },
        spec: {},
      },
    });
    const m = (await custom.getNamespacedCustomObject({ ...MACHINE, name })) as Record<string, unknown>;
    await custom.replaceNamespacedCustomObjectStatus({
      ...MACHINE,
      name,
      body: { ...m, status: { nodeRef: { kind: "Node", name: nodeName, uid: n.metadata!.uid! } } },
    });
  };
  await node("worker-0", {});
  await node("worker-0b", {});
  // worker-1 claims worker-0's host on itself: ignored, its Machine says worker-1
  await node("worker-1", { annotations: { "metal3.io/BareMetalHost": `${HOST_NS}/worker-0` } });
  await node("worker-2", {});
  await node("plain", {});
  // Root on "intruder" wrote every self-description that used to map a node to a host.
  await node("intruder", {
    providerID: `metal3://${HOST_NS}/worker-0/worker-0-m3m`,
    annotations: {
      "metal3.io/BareMetalHost": `${HOST_NS}/worker-0`,
      "machine.openshift.io/machine": `${HOST_NS}/worker-0-m`,
    },
  });
  await machine("worker-0-m", "worker-0", "worker-0");
  await machine("worker-0b-m", "worker-0b");
  await machine("worker-1-m", "worker-1", "worker-1");
  await machine("worker-2-m", "worker-2", "worker-2");
  return {
    cp,
    kc,
    kubeconfigPath: cp.kubeconfigPath,
    core,
    custom,
    kube: new Kube(kc),
    bmc,
    annotationsAtOff,
  };
});

/** Everything printed by the runs in `fn`, with KUBECONFIG pointing at the test cluster. */
async function captured(fn: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const push = (...a: unknown[]) => void lines.push(a.map(String).join(" "));
  const spyLog = vi.spyOn(console, "log").mockImplementation(push);
  const spyErr = vi.spyOn(console, "error").mockImplementation(push);
  const saved = { ...process.env };
  process.env.KUBECONFIG = env().kubeconfigPath;
  delete process.env.FASTFENCE_BMC_USERNAME;
  delete process.env.FASTFENCE_BMC_PASSWORD;
  try {
    await fn();
  } finally {
    spyLog.mockRestore();
    spyErr.mockRestore();
    process.env = saved;
  }
  return lines;
}

const everything: string[] = [];

function view(node: string, discovery: "None" | "Metal3"): View {
  return {
    node: { name: node, bootId: "b", ready: "Unknown", labels: {} },
    openIncidents: [],
    nodes: [],
    policy: resolvePolicy({ fencing: { discovery } }),
    trustedConfirmers: [],
  };
}

// In the order written, also under --sequence.shuffle: the last case scans what every case
// before it printed, and leaves worker-0's Secret with a wrong password and one more
// power-off on its BMC (the power-off case counts the BMC's power-offs from the start).
describe("metal3 BareMetalHost discovery", { shuffle: false }, () => {
  it("fastfence bmc check --node reads power state through the host's BMC and Secret", async () => {
    const codes: number[] = [];
    const lines = await captured(async () => {
      codes.push(await bmcCommand(["check", "--node", "worker-0"]));
      codes.push(await bmcCommand(["status", "--node", "worker-0b", "--json"]));
    });
    everything.push(...lines);
    expect(codes).toEqual([0, 0]);
    const text = lines.join("\n");
    expect(text).toContain(`BareMetalHost ${HOST_NS}/worker-0`);
    expect(text).toContain(`credentials Secret ${HOST_NS}/worker-0-bmc`);
    expect(text).toMatch(/accepted the credentials; power is on \(On\)/);
    const json = JSON.parse(lines.at(-1)!) as { ok: boolean; power: string; node: string };
    expect(json).toMatchObject({ ok: true, power: "on", node: "worker-0b" });
    expect(env().bmc.stats.resets).toEqual([]); // check and status change nothing
  });

  it("errors name what is missing", async () => {
    const runs: [string[], RegExp][] = [
      [
        ["check", "--node", "plain"],
        /no FencingPolicy default entry matches node plain, and metal3 discovery found no host: .*no Machine .*status.nodeRef naming it/,
      ],
      [["check", "--node", "nosuch"], /node nosuch not found/],
      [["check", "--node", "worker-1"], /Secret metal3\/worker-1-bmc needs keys "username" and "password"/],
      [["check", "--node", "worker-2"], /credentials Secret metal3\/worker-2-bmc .* not found/],
      [["check", "--node", "worker-0", "--level", "2"], /has 1 fencing level\(s\).*no level 2/],
    ];
    for (const [argv, want] of runs) {
      let code = -1;
      const lines = await captured(async () => void (code = await bmcCommand(argv)));
      everything.push(...lines);
      expect(code, argv.join(" ")).toBe(2);
      expect(lines.join("\n")).toMatch(want);
    }
  });

  it("discovered levels resolve only when the FencingPolicy opts in", async () => {
    const api = new KubeMetal3Api(env().kube);
    const found = (await discoveryInput(api, view("worker-0", "Metal3"))) as {
      discoveredLevels: ResolvedFencingLevel[];
    };
    expect(found.discoveredLevels).toEqual([
      {
        driver: "redfish",
        address: `redfish+http://127.0.0.1:${env().bmc.port}/redfish/v1/Systems/worker-0`,
        credentialsSecret: "worker-0-bmc",
        timeoutMs: 20_000, // the default level timeout
        options: { insecure: "true" },
        insecure: true, // disableCertificateVerification: the host's explicit insecure setting
        discovered: { kind: "BareMetalHost", namespace: HOST_NS, name: "worker-0" },
      },
    ]);
    const node = { name: "worker-0" };
    expect(
      resolveLevels(resolvePolicy({ fencing: { discovery: "Metal3" } }), node, found.discoveredLevels),
    ).toEqual(found.discoveredLevels);
    expect(resolveLevels(resolvePolicy({}), node, found.discoveredLevels)).toBeUndefined();
    // Opted out: no API reads at all; a node without a host: a reason, not an exception.
    expect(await discoveryInput(api, view("worker-0", "None"))).toEqual({});
    expect(await discoveryInput(api, view("plain", "Metal3"))).toEqual({
      discoveryError: expect.stringMatching(/node plain: no Machine .*status.nodeRef naming it/),
    });
  });

  it("what a node writes about itself never maps it to a host (another node's host, Machine or providerID)", async () => {
    const api = new KubeMetal3Api(env().kube);
    const level = async (node: string) =>
      (await discoveryInput(api, view(node, "Metal3"))) as {
        discoveredLevels?: ResolvedFencingLevel[];
        discoveryError?: string;
      };
    // intruder names worker-0's host, worker-0's Machine and worker-0's providerID on itself
    const intruder = await level("intruder");
    expect(intruder.discoveredLevels).toBeUndefined();
    expect(intruder.discoveryError).toMatch(/node intruder: no Machine .*status.nodeRef naming it/);
    // worker-1 annotates itself with worker-0's host: its own Machine still decides
    expect((await level("worker-1")).discoveredLevels?.[0]?.discovered).toEqual({
      kind: "BareMetalHost",
      namespace: HOST_NS,
      name: "worker-1",
    });
    // the consumerRef route: worker-0b's Machine has no annotation, the host names the Machine
    expect((await level("worker-0b")).discoveredLevels?.[0]?.discovered?.name).toBe("worker-0b");
    let code = -1;
    const lines = await captured(async () => void (code = await bmcCommand(["check", "--node", "intruder"])));
    everything.push(...lines);
    expect(code).toBe(2);
    expect(env().bmc.stats.resets).toEqual([]);
  });

  it("power-off sets the reboot.metal3.io hold first, reads the host's Secret, and the hold is cleared when the incident ends", async () => {
    const e = env();
    const api = new KubeMetal3Api(e.kube);
    const { discoveredLevels } = (await discoveryInput(api, view("worker-0", "Metal3"))) as {
      discoveredLevels: ResolvedFencingLevel[];
    };
    const incident = "worker-0-7f3a";
    const key = rebootAnnotationKey(incident);
    const policy = resolvePolicy({ fencing: { discovery: "Metal3" } });
    // The fastfence namespace has no such Secret: only the host's namespace can work.
    const power = new BmcPowerExecutor(e.kube, FF_NS, systemClock);
    const attempts = await power.powerOff(
      {
        kind: "powerOff",
        node: "worker-0",
        incident,
        round: 1,
        holder: "fence-test",
        levels: discoveredLevels.map((l) => ({ ...l, options: { ...l.options, pollMs: "50" } })),
        timeoutMs: 10_000,
      },
      policy,
      AbortSignal.timeout(15_000),
    );
    everything.push(JSON.stringify(attempts));
    expect(attempts.map((a) => a.result)).toEqual(["off-confirmed"]);
    expect(e.bmc.power).toBe("Off");
    expect(e.annotationsAtOff).toEqual([{ [key]: '{"mode":"hard"}' }]);

    const annotations = async () =>
      (
        (await e.custom.getNamespacedCustomObject({
          ...BMH,
          namespace: HOST_NS,
          name: "worker-0",
        })) as BareMetalHostLike
      ).metadata?.annotations ?? {};
    expect((await annotations())[key]).toBe('{"mode":"hard"}');
    // Another incident's release leaves this hold alone.
    expect(await power.releaseHolds("other-incident", policy)).toEqual([]);
    expect((await annotations())[key]).toBeDefined();
    expect(await power.releaseHolds(incident, policy)).toEqual([`${HOST_NS}/worker-0`]);
    expect((await annotations())[key]).toBeUndefined();
    expect(await power.releaseHolds(incident, policy)).toEqual([]); // idempotent

    // powerOn (powerOnAfterFence) releases the hold before switching on.
    await api.hold({ namespace: HOST_NS, name: "worker-0" }, incident);
    await power.powerOn(
      { kind: "powerOn", node: "worker-0", incident, levels: discoveredLevels },
      policy,
      AbortSignal.timeout(15_000),
    );
    expect((await annotations())[key]).toBeUndefined();
    expect(e.bmc.power).toBe("On");
  });

  it("with FASTFENCE_METAL3_NAMESPACES, a namespaced Role suffices: hosts are listed and released only there", async () => {
    const e = env();
    const OTHER_NS = "metal3-other";
    const incident = "worker-0-ns01";
    const key = rebootAnnotationKey(incident);
    // A host in a namespace the identity has no Role in, carrying the same incident's hold.
    await e.core.createNamespace({ body: { metadata: { name: OTHER_NS } } });
    await e.custom.createNamespacedCustomObject({
      ...BMH,
      namespace: OTHER_NS,
      body: {
        apiVersion: "metal3.io/v1alpha1",
        kind: "BareMetalHost",
        metadata: { name: "other-0", annotations: { [key]: '{"mode":"hard"}' } },
        spec: {
          online: true,
          bmc: { address: "redfish://192.0.2.1/redfish/v1/Systems/1", credentialsName: "other-0-bmc" },
        },
      },
    });
    // The overlays' grant to recover: get/list/patch on BareMetalHosts in one namespace only.
    const rbac = e.kc.makeApiClient(RbacAuthorizationV1Api);
    const user = "metal3-recover-test";
    await rbac.createNamespacedRole({
      namespace: HOST_NS,
      body: {
        metadata: { name: "recover-metal3" },
        rules: [{ apiGroups: ["metal3.io"], resources: ["baremetalhosts"], verbs: ["get", "list", "patch"] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: HOST_NS,
      body: {
        metadata: { name: "recover-metal3" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "recover-metal3" },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user }],
      },
    });
    const userKc = new KubeConfig();
    userKc.loadFromFile(await e.cp.makeUserKubeconfig(user));
    const userKube = new Kube(userKc);
    const namespaces = metal3Namespaces(loadRuntimeConfig({ FASTFENCE_METAL3_NAMESPACES: ` ${HOST_NS} ,` }));
    expect(namespaces).toEqual([HOST_NS]);
    const scoped = new KubeMetal3Api(userKube, { namespaces });
    const policy = resolvePolicy({ fencing: { discovery: "Metal3" } });

    // RBAC settles asynchronously in the authorizer's cache: wait until the Role applies.
    const deadline = Date.now() + 10_000;
    let hosts: BareMetalHostLike[] = [];
    for (;;) {
      try {
        hosts = await scoped.listHosts();
        break;
      } catch (err) {
        if (!(err instanceof KubeApiError && err.status === 403) || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(hosts.map((h) => `${h.metadata?.namespace}/${h.metadata?.name}`).sort()).toEqual(
      ["worker-0", "worker-0b", "worker-1", "worker-2"].map((n) => `${HOST_NS}/${n}`),
    );

    // Unscoped (the old behaviour), the same identity gets a 403 on the cluster-wide list,
    // which a strict release (fencing.discovery Metal3) must not swallow.
    const unscoped = new KubeMetal3Api(userKube);
    await expect(unscoped.listHosts()).rejects.toMatchObject({ status: 403 });
    await expect(unscoped.releaseIncident(incident, true)).rejects.toMatchObject({ status: 403 });
    expect(await unscoped.releaseIncident(incident, false)).toEqual([]);

    // Scoped: hold and release through the power executor as recover runs it (strict).
    await scoped.hold({ namespace: HOST_NS, name: "worker-0" }, incident);
    const power = new BmcPowerExecutor(userKube, FF_NS, systemClock, scoped);
    expect(await power.releaseHolds(incident, policy)).toEqual([`${HOST_NS}/worker-0`]);
    expect(await power.releaseHolds(incident, policy)).toEqual([]); // idempotent
    const annotationsOf = async (namespace: string, name: string) =>
      ((await e.custom.getNamespacedCustomObject({ ...BMH, namespace, name })) as BareMetalHostLike).metadata
        ?.annotations ?? {};
    expect((await annotationsOf(HOST_NS, "worker-0"))[key]).toBeUndefined();
    // The host outside the configured namespaces was never seen, so it keeps its hold.
    expect((await annotationsOf(OTHER_NS, "other-0"))[key]).toBe('{"mode":"hard"}');
  });

  it("off and on --node, and a wrong password, never print the credentials", async () => {
    const e = env();
    const codes: number[] = [];
    const lines = await captured(async () => {
      codes.push(await bmcCommand(["off", "--node", "worker-0", "--poll-ms", "50", "--timeout-ms", "10000"]));
      codes.push(await bmcCommand(["on", "--node", "worker-0", "--json"]));
    });
    expect(codes).toEqual([0, 0]);
    expect(lines.join("\n")).toMatch(/power-off confirmed by read-back/);
    everything.push(...lines);

    const s = await e.core.readNamespacedSecret({ namespace: HOST_NS, name: "worker-0-bmc" });
    s.data = { ...s.data, password: Buffer.from(`x${PASS}y`).toString("base64") };
    await e.core.replaceNamespacedSecret({ namespace: HOST_NS, name: "worker-0-bmc", body: s });
    let code = -1;
    const bad = await captured(async () => void (code = await bmcCommand(["check", "--node", "worker-0"])));
    expect(code).toBe(1);
    expect(bad.join("\n")).toMatch(/FF_BMC_AUTH_FAILED/);
    everything.push(...bad);

    const all = everything.join("\n");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(PASS);
    expect(all).not.toContain(Buffer.from(PASS).toString("base64"));
  });
});
