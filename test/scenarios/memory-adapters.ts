// In-memory doubles of the adapters the stage executor takes (StageAdapters), for unit and
// scenario tests of the real executor (infra/runtime/stage-executor.ts): one MemoryCluster
// holds NodeFences, Nodes, Leases, pods, VolumeAttachments and virt-launcher pods; small doubles of
// IncidentStore, NodeOps, LeaseManager, PolicyReader, Kube and PowerExecutor act on it
// with the same guards the real adapters have (resourceVersion-guarded status writes and
// AlreadyExists on create fail with KubeApiError 409, a missing incident with 404, a Lease
// held by someone else is "not acquired"). Every call lands in a journal, and one-shot
// `before` hooks let a test slip another writer's change (or a failure) in between a read
// and a write. They implement only what the executor calls; they must never be weaker than
// the real adapters' guards (a test passing here must not rely on a write the API server
// would refuse), and never perform I/O.
import { fencedOffValue } from "../../core/fenced-off.ts";
import type { Clock } from "../../core/clock.ts";
import { heartbeatLeaseName, type Action, type NodeInfo } from "../../core/decision.ts";
import { OBSERVER_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import {
  isTerminal,
  NODE_LABEL,
  type Attempt,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { HandlerContext } from "../../infra/runtime/contract.ts";
import type { Metal3Api } from "../../infra/bmc/metal3.ts";
import { KubeApiError, type Kube, type KubeApis } from "../../infra/kube/client.ts";
import type { IncidentStore } from "../../infra/kube/incidents.ts";
import type { AcquireOptions, LeaseManager, LeaseResult } from "../../infra/kube/lease.ts";
import type { NodeOps, NodeInfo as KubeNodeInfo, Released } from "../../infra/kube/nodes.ts";
import type { PolicyReader } from "../../infra/kube/policy.ts";
import { createLogger } from "../../infra/log.ts";
import type { PowerExecutor, StageAdapters } from "../../infra/runtime/stage-executor.ts";

/** Every adapter call a double journals (reads and effects). */
export type Op =
  | "incidents.get"
  | "incidents.listOpen"
  | "incidents.openForNode"
  | "incidents.create"
  | "incidents.writeStatus"
  | "nodes.get"
  | "nodes.list"
  | "nodes.setTaint"
  | "nodes.setFencedOff"
  | "nodes.forceDeletePods"
  | "nodes.deleteVolumeAttachments"
  | "nodes.deleteVmLaunchers"
  | "leases.acquire"
  | "leases.release"
  | "kube.readLease"
  | "kube.listLeases"
  /** A Lease created or replaced through Kube (the admission ledger). */
  | "kube.writeLease"
  | "policy.get"
  | "power.prepare"
  | "power.powerOff"
  | "power.powerOn"
  | "power.releaseHolds"
  /** Not an adapter call: a test may journal the executor's sleeps (TestClock.onSleep). */
  | "clock.sleep";

const READS: ReadonlySet<Op> = new Set<Op>([
  "incidents.get",
  "incidents.listOpen",
  "incidents.openForNode",
  "nodes.get",
  "nodes.list",
  "kube.readLease",
  "kube.listLeases",
  "policy.get",
]);

export interface JournalEntry {
  op: Op;
  /** What the call was about, e.g. "a-aaaaaaaa Fencing". */
  detail: string;
  /** Set when the call failed: the HTTP status of a KubeApiError, else the error's name. */
  error?: string;
}

/** A change another writer makes, or a failure, slipped in just before a call runs. */
export type Hook = (detail: string) => void | Promise<void>;

export interface StoredLease {
  /** Unset: the fastfence namespace; "kube-node-lease" for a kubelet's Lease. */
  namespace?: string;
  /** Set by writes through Kube (create/replace), which are guarded by it; else "0". */
  resourceVersion?: string;
  annotations?: Record<string, string>;
  holder: string;
  /** RFC 3339. */
  acquireTime: string;
  renewTime: string;
  durationSeconds: number;
}

export interface Workload {
  namespace: string;
  name: string;
  node: string;
}

export interface PhaseWrite {
  incident: string;
  phase: NodeFenceStatus["phase"];
  /** create / writeStatus through the adapter, or external (another writer, seeded by a test). */
  by: "create" | "writeStatus" | "external";
}

const clone = <T>(v: T): T => structuredClone(v);

function errorTag(err: unknown): string {
  if (err instanceof KubeApiError) return String(err.status);
  return err instanceof Error ? err.name : String(err);
}

export function conflict(what: string, reason: "Conflict" | "AlreadyExists" = "Conflict"): KubeApiError {
  return new KubeApiError(409, what, { reason, message: `${what}: ${reason}` }, undefined);
}

/** The state the doubles share, as the API server (and the BMCs) would hold it. */
export class MemoryCluster {
  readonly namespace = "fastfence";
  /** etcd's revision: every write bumps it, and an object's resourceVersion is the revision that wrote it. */
  revision = 1;
  readonly incidents = new Map<string, NodeFence>();
  readonly nodes = new Map<string, KubeNodeInfo>();
  readonly leases = new Map<string, StoredLease>();
  pods: Workload[] = [];
  volumeAttachments: Workload[] = [];
  /** virt-launcher pods; the double keeps them apart from `pods` (in the API they are pods too). */
  vmLaunchers: Workload[] = [];
  /** Power state by node, as the BMCs report it (PowerExecutor double). */
  readonly power = new Map<string, "On" | "Off">();
  policy: FencingPolicySpec;
  /** Every call in the order it settled (a write's entry is its result: done, or failed with `error`). */
  readonly journal: JournalEntry[] = [];
  /** Every phase an incident was written in, in order. */
  readonly phaseWrites: PhaseWrite[] = [];
  private readonly hooks = new Map<Op, { fn: Hook; left: number }[]>();
  private readonly now: () => number;

  constructor(opts: { policy: FencingPolicySpec; nodes?: readonly NodeInfo[]; now?: () => number }) {
    this.policy = opts.policy;
    this.now = opts.now ?? (() => 0);
    for (const n of opts.nodes ?? []) this.setNode(n);
  }

  /** Adds or replaces a node (a reboot is a new bootId); its taints are kept. */
  setNode(n: NodeInfo): void {
    const prev = this.nodes.get(n.name);
    this.nodes.set(n.name, {
      name: n.name,
      bootId: n.bootId,
      ready: n.ready,
      labels: { ...n.labels },
      taints: prev?.taints ?? [],
      resourceVersion: String(++this.revision),
      unschedulable: n.unschedulable === true,
      annotations: { ...(n.annotations ?? {}) },
      ...(prev?.fencedOff !== undefined ? { fencedOff: prev.fencedOff } : {}),
    });
    if (!this.power.has(n.name)) this.power.set(n.name, "On");
  }

  /** Stores an incident as if another writer had created it (a new resourceVersion). */
  seedIncident(inc: NodeFence): NodeFence {
    const stored: NodeFence = {
      ...clone(inc),
      metadata: {
        ...clone(inc.metadata),
        namespace: this.namespace,
        resourceVersion: String(++this.revision),
        creationTimestamp: inc.metadata.creationTimestamp ?? new Date(this.now()).toISOString(),
      },
    };
    this.incidents.set(inc.metadata.name, stored);
    // an incident seeded past its proven power-off: fence wrote the fenced-off fact first
    const n = this.nodes.get(inc.spec.nodeName);
    if (n && stored.status?.powerOffConfirmedAt && n.bootId === inc.spec.bootId)
      n.fencedOff = fencedOffValue(inc.metadata.name, inc.spec.bootId);
    if (stored.status)
      this.phaseWrites.push({ incident: inc.metadata.name, phase: stored.status.phase, by: "external" });
    return clone(stored);
  }

  /** Another writer changes an incident's status (its resourceVersion moves on). */
  externalWrite(name: string, change: (st: NodeFenceStatus) => NodeFenceStatus): NodeFence {
    const cur = this.incidents.get(name);
    if (!cur?.status) throw new Error(`memory cluster: no incident ${name} with a status`);
    const status = change(clone(cur.status));
    this.incidents.set(name, {
      ...cur,
      metadata: { ...cur.metadata, resourceVersion: String(++this.revision) },
      status,
    });
    this.phaseWrites.push({ incident: name, phase: status.phase, by: "external" });
    return clone(this.incidents.get(name)!);
  }

  /** Another holder takes a Lease (as its LeaseManager would). */
  externalLease(name: string, holder: string, now: number, durationSeconds = 15): void {
    const t = new Date(now).toISOString();
    this.leases.set(name, { holder, acquireTime: t, renewTime: t, durationSeconds });
  }

  /**
   * An observer node's event source renewed its heartbeat Lease at `now`, publishing its
   * key annotation (fastfence.io/observer-key); the default duration covers every test time.
   */
  publishObserver(node: string, keyAnnotation: string, now: number, durationSeconds = 1e6): void {
    const t = new Date(now).toISOString();
    this.leases.set(heartbeatLeaseName(node), {
      annotations: { [OBSERVER_KEY_ANNOTATION]: keyAnnotation },
      holder: `event-source-${node}`,
      acquireTime: t,
      renewTime: t,
      durationSeconds,
    });
  }

  /** A kubelet renewed its Lease (kube-node-lease/<node>) at `now`. */
  kubeletLease(node: string, now: number): void {
    const t = new Date(now).toISOString();
    this.leases.set(node, {
      namespace: "kube-node-lease",
      holder: node,
      acquireTime: t,
      renewTime: t,
      durationSeconds: 40,
    });
  }

  incident(name: string): NodeFence | undefined {
    const i = this.incidents.get(name);
    return i && clone(i);
  }

  /** The phases written for one incident, in order (create, status writes, other writers). */
  phases(name: string): NodeFenceStatus["phase"][] {
    return this.phaseWrites.filter((w) => w.incident === name).map((w) => w.phase);
  }

  taints(node: string): string[] {
    return (this.nodes.get(node)?.taints ?? []).map((t) => `${t.key}=${t.value ?? ""}:${t.effect}`);
  }

  /** Journal entries that are not reads: "op detail" or "op detail ✗error". */
  effects(): string[] {
    return this.journal
      .filter((e) => !READS.has(e.op))
      .map((e) => `${e.op} ${e.detail}${e.error ? ` ✗${e.error}` : ""}`.trimEnd());
  }

  /** How many calls of `op` were made (failed ones included). */
  count(op: Op, ok?: "ok" | "failed"): number {
    return this.journal.filter(
      (e) => e.op === op && (ok === undefined || (ok === "ok" ? !e.error : !!e.error)),
    ).length;
  }

  /**
   * Runs `fn` at the start of the next `times` calls of `op`, before the call reads or
   * writes anything: another writer's change, or a failure (throw) the call then reports.
   */
  before(op: Op, fn: Hook, times = 1): void {
    const list = this.hooks.get(op) ?? [];
    list.push({ fn, left: times });
    this.hooks.set(op, list);
  }

  /** The next call of `op` fails with `err` (nothing is written). */
  failNext(op: Op, err: unknown, times = 1): void {
    this.before(
      op,
      () => {
        throw err;
      },
      times,
    );
  }

  /**
   * Runs one double's call: hooks first, then the body; the journal records how it settled.
   * Unless a hook waits, every call settles two microtasks after it began, done or failed,
   * so concurrent calls settle in the order they began (as equally fast API calls would).
   */
  async call<T>(op: Op, detail: string, body: () => T | Promise<T>): Promise<T> {
    try {
      await Promise.resolve();
      for (const h of [...(this.hooks.get(op) ?? [])]) {
        if (h.left <= 0) continue;
        h.left--;
        const wait = h.fn(detail);
        if (wait) await wait;
      }
      const r = await body();
      this.journal.push({ op, detail });
      return r;
    } catch (err) {
      await Promise.resolve();
      this.journal.push({ op, detail, error: errorTag(err) });
      throw err;
    }
  }

  bump(): string {
    return String(++this.revision);
  }

  creationTime(): string {
    return new Date(this.now()).toISOString();
  }
}

/** IncidentStore: NodeFences with resourceVersion-guarded status writes. */
export class MemoryIncidents implements Pick<
  IncidentStore,
  "namespace" | "get" | "listOpen" | "openForNode" | "create" | "writeStatus"
> {
  private readonly c: MemoryCluster;
  readonly namespace: string;
  constructor(c: MemoryCluster) {
    this.c = c;
    this.namespace = c.namespace;
  }

  get(name: string): Promise<NodeFence | undefined> {
    return this.c.call("incidents.get", name, () => this.c.incident(name));
  }

  listOpen(): Promise<NodeFence[]> {
    return this.c.call("incidents.listOpen", "", () =>
      [...this.c.incidents.values()].filter((i) => !isTerminal(i.status?.phase ?? "Suspected")).map(clone),
    );
  }

  /** The node's newest non-terminal incident (creationTimestamp, then creation order). */
  openForNode(node: string, exceptBootId?: string): Promise<NodeFence | undefined> {
    return this.c.call("incidents.openForNode", node, () => {
      const open = [...this.c.incidents.values()]
        .filter((i) => i.metadata.labels?.[NODE_LABEL] === node)
        .filter((i) => !isTerminal(i.status?.phase ?? "Suspected") && i.spec.bootId !== exceptBootId)
        .reverse();
      open.sort((a, b) =>
        (b.metadata.creationTimestamp ?? "").localeCompare(a.metadata.creationTimestamp ?? ""),
      );
      return open[0] && clone(open[0]);
    });
  }

  /** Creates the incident and writes its status; AlreadyExists is a 409, as on the API server. */
  create(incident: NodeFence): Promise<NodeFence> {
    const name = incident.metadata.name;
    return this.c.call("incidents.create", `${name} ${incident.status?.phase ?? ""}`.trim(), () => {
      if (this.c.incidents.has(name)) throw conflict(`create nodefence ${name}`, "AlreadyExists");
      this.c.bump(); // the create itself; the status write below gets the next revision
      const stored: NodeFence = {
        ...clone(incident),
        metadata: {
          ...clone(incident.metadata),
          namespace: this.namespace,
          creationTimestamp: this.c.creationTime(),
          resourceVersion: this.c.bump(),
        },
      };
      this.c.incidents.set(name, stored);
      if (stored.status)
        this.c.phaseWrites.push({ incident: name, phase: stored.status.phase, by: "create" });
      return clone(stored);
    });
  }

  /** Replaces the status if the incident is still at `resourceVersion`: else 409 (404 if gone). */
  writeStatus(name: string, resourceVersion: string, status: NodeFenceStatus): Promise<NodeFence> {
    return this.c.call("incidents.writeStatus", `${name} ${status.phase}`, () => {
      const cur = this.c.incidents.get(name);
      if (!cur)
        throw new KubeApiError(404, `write status of nodefence ${name}`, { message: "not found" }, undefined);
      if (cur.metadata.resourceVersion !== resourceVersion)
        throw conflict(`write status of nodefence ${name}`);
      const stored: NodeFence = {
        ...cur,
        metadata: { ...cur.metadata, resourceVersion: this.c.bump() },
        status: clone(status),
      };
      this.c.incidents.set(name, stored);
      this.c.phaseWrites.push({ incident: name, phase: status.phase, by: "writeStatus" });
      return clone(stored);
    });
  }
}

/** NodeOps: node reads, the out-of-service taint, and the release deletes. */
export class MemoryNodes implements Pick<
  NodeOps,
  | "get"
  | "list"
  | "setTaint"
  | "setFencedOff"
  | "forceDeletePods"
  | "deleteVolumeAttachments"
  | "deleteVmLaunchers"
> {
  private readonly c: MemoryCluster;
  constructor(c: MemoryCluster) {
    this.c = c;
  }

  get(name: string): Promise<KubeNodeInfo | undefined> {
    return this.c.call("nodes.get", name, () => {
      const n = this.c.nodes.get(name);
      return n && clone(n);
    });
  }

  list(): Promise<KubeNodeInfo[]> {
    return this.c.call("nodes.list", "", () => [...this.c.nodes.values()].map(clone));
  }

  setTaint(name: string, taint: Parameters<NodeOps["setTaint"]>[1], present: boolean): Promise<boolean> {
    return this.c.call("nodes.setTaint", `${name} ${present ? "+" : "-"}${taint.key}`, () => {
      const n = this.c.nodes.get(name);
      if (!n) throw new KubeApiError(404, `read node ${name}`, { message: "not found" }, undefined);
      const same = (t: { key: string; effect: string }) => t.key === taint.key && t.effect === taint.effect;
      const has = n.taints.some(same);
      if (has === present) return false;
      n.taints = present ? [...n.taints, { ...taint }] : n.taints.filter((t) => !same(t));
      n.resourceVersion = this.c.bump();
      return true;
    });
  }

  setFencedOff(name: string, value: string): Promise<void> {
    return this.c.call("nodes.setFencedOff", `${name} ${value}`, () => {
      const n = this.c.nodes.get(name);
      if (!n) throw new KubeApiError(404, `read node ${name}`, { message: "not found" }, undefined);
      n.fencedOff = value;
      n.resourceVersion = this.c.bump();
    });
  }

  /** Its pods never hold VM launchers (`vmLaunchers` does): the option only shows in the journal. */
  forceDeletePods(node: string, o: { exceptVmLaunchers?: boolean } = {}): Promise<Released["pods"]> {
    return this.c.call(
      "nodes.forceDeletePods",
      o.exceptVmLaunchers ? `${node} except VM launchers` : node,
      () => {
        const gone = this.c.pods.filter((p) => p.node === node);
        this.c.pods = this.c.pods.filter((p) => p.node !== node);
        return gone.map((p) => `${p.namespace}/${p.name}`);
      },
    );
  }

  deleteVolumeAttachments(node: string): Promise<Released["volumeAttachments"]> {
    return this.c.call("nodes.deleteVolumeAttachments", node, () => {
      const gone = this.c.volumeAttachments.filter((v) => v.node === node);
      this.c.volumeAttachments = this.c.volumeAttachments.filter((v) => v.node !== node);
      return gone.map((v) => v.name);
    });
  }

  deleteVmLaunchers(node: string): Promise<Released["vmLaunchers"]> {
    return this.c.call("nodes.deleteVmLaunchers", node, () => {
      const gone = this.c.vmLaunchers.filter((v) => v.node === node);
      this.c.vmLaunchers = this.c.vmLaunchers.filter((v) => v.node !== node);
      return gone.map((v) => `${v.namespace}/${v.name}`);
    });
  }
}

/** LeaseManager: never takes over a Lease another holder renewed within its duration. */
export class MemoryLeases implements Pick<LeaseManager, "acquire" | "release"> {
  private readonly c: MemoryCluster;
  private readonly durationSeconds: number;
  constructor(c: MemoryCluster, durationSeconds = 15) {
    this.c = c;
    this.durationSeconds = durationSeconds;
  }

  acquire(name: string, holder: string, now: number, opts: AcquireOptions = {}): Promise<LeaseResult> {
    const { annotations } = opts;
    return this.c.call("leases.acquire", `${name} ${holder}`, () => {
      const cur = this.c.leases.get(name);
      const expires = cur ? Date.parse(cur.renewTime) + cur.durationSeconds * 1000 : 0;
      if (cur?.holder && cur.holder !== holder && expires > now)
        return { acquired: false, holder: cur.holder, expiresAt: expires } as const;
      const t = new Date(now).toISOString();
      const ann = cur?.annotations ?? {};
      this.c.leases.set(name, {
        ...(annotations || cur?.annotations ? { annotations: { ...ann, ...annotations?.(ann) } } : {}),
        holder,
        acquireTime: cur?.holder === holder ? cur.acquireTime : t,
        renewTime: t,
        durationSeconds:
          opts.durationMs !== undefined ? Math.ceil(opts.durationMs / 1000) : this.durationSeconds,
      });
      return { acquired: true, lease: { metadata: { name } } } as const;
    });
  }

  /** Clears the holder if it is still `holder` (as the real release does); else nothing. */
  release(name: string, holder: string): Promise<void> {
    return this.c.call("leases.release", `${name} ${holder}`, () => {
      const cur = this.c.leases.get(name);
      if (cur?.holder === holder) this.c.leases.set(name, { ...cur, holder: "", durationSeconds: 1 });
    });
  }
}

/** A Kube whose every request, call() and read() alike, is answered by `call` (unit tests' stand-in). */
export function kubeAnswering(call: (...args: never[]) => Promise<unknown>): Kube {
  return { call, read: call } as unknown as Kube;
}

/** Kube: only Lease reads and the admission ledger's writes go through it; any other API call fails loudly. */
export class MemoryKube implements Pick<Kube, "call" | "read"> {
  private readonly c: MemoryCluster;
  private readonly apis: KubeApis;
  constructor(c: MemoryCluster) {
    this.c = c;
    const missing = (group: string) =>
      new Proxy(
        {},
        {
          get: (_t, key) => () => {
            throw new Error(`memory kube: ${group}.${String(key)} is not implemented`);
          },
        },
      );
    const asLease = (name: string, l: StoredLease) => ({
      metadata: {
        name,
        namespace: l.namespace ?? this.c.namespace,
        resourceVersion: l.resourceVersion ?? "0",
        ...(l.annotations ? { annotations: { ...l.annotations } } : {}),
      },
      spec: {
        holderIdentity: l.holder,
        acquireTime: l.acquireTime,
        renewTime: l.renewTime,
        leaseDurationSeconds: l.durationSeconds,
      },
    });
    const inNamespace = (namespace: string) =>
      [...this.c.leases].filter(([, l]) => (l.namespace ?? this.c.namespace) === namespace);
    const readNamespacedLease = ({ name, namespace }: { name: string; namespace: string }) =>
      this.c.call("kube.readLease", name, () => {
        const l = inNamespace(namespace).find(([n]) => n === name)?.[1];
        if (!l) throw new KubeApiError(404, `read lease ${name}`, { message: "not found" }, undefined);
        return asLease(name, l);
      });
    const listNamespacedLease = ({ namespace }: { namespace: string }) =>
      this.c.call("kube.listLeases", namespace, () => ({
        items: inNamespace(namespace).map(([n, l]) => asLease(n, l)),
      }));
    type LeaseBody = {
      metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> };
    };
    const stored = (name: string, namespace: string, body: LeaseBody): StoredLease => ({
      ...(namespace !== this.c.namespace ? { namespace } : {}),
      resourceVersion: String(++this.c.revision),
      ...(body.metadata?.annotations ? { annotations: { ...body.metadata.annotations } } : {}),
      holder: "",
      acquireTime: "",
      renewTime: "",
      durationSeconds: 0,
    });
    // Guarded like the API server's: AlreadyExists on create, 404 and a resourceVersion
    // precondition (409) on replace.
    const createNamespacedLease = ({ namespace, body }: { namespace: string; body: LeaseBody }) =>
      this.c.call("kube.writeLease", `create ${body.metadata?.name}`, () => {
        const name = body.metadata!.name!;
        if (inNamespace(namespace).some(([n]) => n === name))
          throw new KubeApiError(409, `create lease ${name}`, { message: "already exists" }, undefined);
        this.c.leases.set(name, stored(name, namespace, body));
        return asLease(name, this.c.leases.get(name)!);
      });
    const replaceNamespacedLease = ({
      name,
      namespace,
      body,
    }: {
      name: string;
      namespace: string;
      body: LeaseBody;
    }) =>
      this.c.call("kube.writeLease", `replace ${name}`, () => {
        const cur = inNamespace(namespace).find(([n]) => n === name)?.[1];
        if (!cur) throw new KubeApiError(404, `replace lease ${name}`, { message: "not found" }, undefined);
        if (body.metadata?.resourceVersion !== (cur.resourceVersion ?? "0"))
          throw new KubeApiError(409, `replace lease ${name}`, { message: "conflict" }, undefined);
        this.c.leases.set(name, stored(name, namespace, body));
        return asLease(name, this.c.leases.get(name)!);
      });
    this.apis = {
      core: missing("core"),
      storage: missing("storage"),
      custom: missing("custom"),
      coordination: new Proxy(
        { readNamespacedLease, listNamespacedLease, createNamespacedLease, replaceNamespacedLease } as object,
        {
          get: (t, key) =>
            key in t
              ? (t as Record<string | symbol, unknown>)[key]
              : () => {
                  throw new Error(`memory kube: coordination.${String(key)} is not implemented`);
                },
        },
      ),
    } as unknown as KubeApis;
  }

  call<T>(_what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    return fn(this.apis);
  }

  /** One answer, as the single API server the memory cluster is: nothing to hedge. */
  read<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    return this.call(what, fn);
  }
}

/** PolicyReader: the cluster's current policy. */
export class MemoryPolicy implements Pick<PolicyReader, "get"> {
  private readonly c: MemoryCluster;
  constructor(c: MemoryCluster) {
    this.c = c;
  }
  get(_now: number): Promise<FencingPolicySpec> {
    return this.c.call("policy.get", "", () => this.c.policy);
  }
}

type PowerOff = Extract<Action, { kind: "powerOff" }>;
type PowerOn = Extract<Action, { kind: "powerOn" }>;

/** One off-confirmed attempt at the first level, read back Off at `now` (what a healthy BMC gives). */
export function confirmedOff(a: PowerOff, now: number): Attempt[] {
  const t = new Date(now).toISOString();
  return [
    {
      round: a.round,
      level: 0,
      driver: a.levels[0]?.driver ?? "redfish",
      by: a.holder,
      startedAt: t,
      commandAt: t,
      finishedAt: t,
      result: "off-confirmed",
      readBackState: "Off",
      readBackAt: t,
    },
  ];
}

/**
 * PowerExecutor: `offScript` says what a power-off round returns (default: confirmed off
 * at the first level); the node's power state follows an off-confirmed attempt.
 */
export class MemoryPower implements PowerExecutor {
  private readonly c: MemoryCluster;
  private readonly clock: Clock;
  offScript: (a: PowerOff, signal: AbortSignal) => Attempt[] | Promise<Attempt[]>;
  /** Hosts a releaseHolds call reports as released (metal3 holds), per incident. */
  holds = new Map<string, string[]>();
  constructor(c: MemoryCluster, clock: Clock) {
    this.c = c;
    this.clock = clock;
    this.offScript = (a) => confirmedOff(a, this.clock.now());
  }

  prepare(a: PowerOff, _signal: AbortSignal): Promise<void> {
    return this.c.call("power.prepare", a.node, () => undefined);
  }

  powerOff(a: PowerOff, _policy: FencingPolicySpec, signal: AbortSignal): Promise<Attempt[]> {
    return this.c.call("power.powerOff", `${a.node} round ${a.round} by ${a.holder}`, async () => {
      const attempts = await this.offScript(a, signal);
      if (attempts.some((x) => x.result === "off-confirmed" && x.readBackState === "Off"))
        this.c.power.set(a.node, "Off");
      return attempts;
    });
  }

  powerOn(a: PowerOn, _policy: FencingPolicySpec, _signal: AbortSignal): Promise<void> {
    return this.c.call("power.powerOn", a.node, () => void this.c.power.set(a.node, "On"));
  }

  releaseHolds(incident: string, _policy: FencingPolicySpec): Promise<string[]> {
    return this.c.call("power.releaseHolds", incident, () => this.holds.get(incident) ?? []);
  }
}

/** metal3 access that must not be used (fencing.discovery "None"): any call fails the test. */
export const NO_METAL3: Metal3Api = {
  getNode: (name) => Promise.reject(new Error(`unexpected metal3 read of node ${name}`)),
  listHosts: () => Promise.reject(new Error("unexpected metal3 list of hosts")),
  listMachines: () => Promise.reject(new Error("unexpected metal3 list of machines")),
  getInfrastructure: () => Promise.reject(new Error("unexpected metal3 read of an infrastructure object")),
  getHost: (namespace, name) =>
    Promise.reject(new Error(`unexpected metal3 read of host ${namespace}/${name}`)),
};

/**
 * The executor's adapters over one MemoryCluster. The doubles implement the public
 * methods the executor calls (checked against the real classes by `implements Pick<…>`);
 * the casts only drop the real classes' private fields.
 */
export function memoryAdapters(c: MemoryCluster, opts: { power?: PowerExecutor } = {}): StageAdapters {
  return {
    kube: new MemoryKube(c) as unknown as Kube,
    incidents: new MemoryIncidents(c) as unknown as IncidentStore,
    nodes: new MemoryNodes(c) as unknown as NodeOps,
    leases: new MemoryLeases(c) as unknown as LeaseManager,
    leaseNamespace: c.namespace,
    policy: new MemoryPolicy(c) as unknown as PolicyReader,
    ...(opts.power ? { power: opts.power } : {}),
    metal3: NO_METAL3,
  };
}

/**
 * A clock whose sleeps take no real time: a sleep moves `now` forward, unless the signal
 * is (or, in `onSleep`, becomes) aborted, then it rejects with the signal's reason.
 */
export class TestClock implements Clock {
  private t: number;
  /** Called when a sleep starts (a test can abort the handler's signal here). */
  onSleep: ((ms: number) => void) | undefined;
  readonly sleeps: number[] = [];
  constructor(start: number) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  set(ms: number): void {
    this.t = ms;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    this.sleeps.push(ms);
    this.onSleep?.(ms);
    signal?.throwIfAborted();
    this.t += ms;
  }
}

/** A handler context with a silent logger; deadline extensions are pushed to `extended`. */
export function handlerContext(
  clock: Clock,
  signal: AbortSignal = new AbortController().signal,
  extended: number[] = [],
): HandlerContext {
  return {
    log: createLogger("test", { level: "silent" }),
    clock,
    signal,
    extendDeadline: (until) => void extended.push(until),
  };
}
