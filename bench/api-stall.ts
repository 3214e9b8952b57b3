// bench-api-stall: how long the surviving API servers of the compact lab stall after a
// control-plane node dies silently, and what that does to fastfence. Per trial: `lab crash`
// of a node (the etcd leader by default), then for --watch seconds each survivor's own API
// server is asked every 250 ms, directly (no failover), for a GET of a Lease and a create
// of a ConfigMap, each with fastfence's 2000 ms request timeout; the victim is then power-
// cycled, and the next trial waits for the whole lab healthy again (one fault at a time:
// harness/lab-driver.ts waitLabHealthy). Reports, per trial and as percentiles over the trials: the
// share of requests that got no answer within the timeout, when the last such request
// began (the stall's end), until when a LIST of the Leases through a survivor (as detect
// reads the observers' heartbeats) showed a survivor's heartbeat stale, and the victim's
// incident times (suspected, power-off proven, released) from its NodeFence. The last
// line is `RESULT {json}`.
// It drives a lab through the CLI and its control endpoints only: it brings one up (and
// down) unless --reuse, and never touches processes it did not start.
//   node bench/api-stall.ts [--trials 3] [--victim etcd-leader|node-a|...] [--watch 45] [--reuse]
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { parseArgs } from "node:util";
import { labCli, labControl, labDown, until, waitLabHealthy } from "../harness/lab-driver.ts";
import { heartbeatLeaseName } from "../core/decision.ts";
import { NODE_API_PORT } from "../lab/compact-plane.ts";
import { readState } from "../lab/state.ts";
import { percentiles } from "../lab/bench-chart.ts";

const { values } = parseArgs({
  options: {
    trials: { type: "string", default: "3" },
    victim: { type: "string", default: "etcd-leader" },
    watch: { type: "string", default: "45" },
    reuse: { type: "boolean", default: false },
  },
});
const TRIALS = Number(values.trials);
const WATCH_MS = Number(values.watch) * 1000;
const TIMEOUT_MS = 2000; // FASTFENCE_KUBE_TIMEOUT_MS's default
const RELEASE_WAIT_MS = 240_000; // from the crash
const STALE_MS = 3000; // the default policy's observer heartbeat bound (Lease duration + skew)
if (!Number.isInteger(TRIALS) || TRIALS < 1)
  throw new Error(`--trials: a whole number ≥ 1, not ${values.trials}`);
if (!(WATCH_MS >= 5000)) throw new Error(`--watch: seconds ≥ 5, not ${values.watch}`);

interface Status {
  etcdLeader: string | null;
  etcdMembersUp: number;
  apiBackends: { node: string; up: boolean }[];
  nodes: { name: string; ip: string }[];
}
const status = () => JSON.parse(labCli(["status", "-o", "json"])) as Status;
const log = (s: string) => console.log(`${new Date().toISOString()} ${s}`);

/** The admin kubeconfig aimed at one API server, with fastfence's request timeout. */
function clientFor(admin: KubeConfig, ip: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...admin.getCurrentCluster()!, server: `https://${ip}:${NODE_API_PORT}` }],
    users: admin.users,
    contexts: admin.contexts,
    currentContext: admin.currentContext,
  });
  return kc;
}

interface Probe {
  at: number; // ms after the crash the request began
  ok: boolean;
}

async function timedValue<T>(f: () => Promise<T>): Promise<T | undefined> {
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  const hang = new Promise<undefined>((r) => signal.addEventListener("abort", () => r(undefined)));
  return Promise.race([f().catch(() => undefined), hang]);
}

async function timed(f: () => Promise<unknown>): Promise<boolean> {
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  // the client's own middleware has no deadline: race it (a hung request is abandoned)
  const hang = new Promise<false>((r) => signal.addEventListener("abort", () => r(false)));
  return Promise.race([
    f().then(
      () => true,
      () => false,
    ),
    hang,
  ]);
}

interface Trial {
  victim: string;
  requests: number;
  unanswered: number;
  lastUnansweredMs: number;
  /** The last probe whose LIST showed a survivor's heartbeat older than STALE_MS (0: none). */
  heartbeatStaleUntilMs: number;
  /** Negative: the incident was open before the crash (a survivor suspected in an earlier trial's stall). */
  suspectedMs?: number;
  confirmedMs?: number;
  provenMs?: number;
  releasedMs?: number;
}

async function trial(admin: KubeConfig, n: number): Promise<Trial> {
  await waitLabHealthy(); // the previous trial's victim back: one fault at a time
  const before = status();
  const victim =
    values.victim === "etcd-leader"
      ? before.etcdLeader!
      : before.nodes.find((x) => x.name === values.victim)?.name;
  if (!victim) throw new Error(`--victim ${values.victim}: no such node in the lab`);
  const survivors = before.nodes.filter((x) => x.name !== victim);
  const apis = survivors.map((s) => {
    const kc = clientFor(admin, s.ip);
    return { node: s.name, coord: kc.makeApiClient(CoordinationV1Api), core: kc.makeApiClient(CoreV1Api) };
  });
  const t0 = (await labControl("/crash", { node: victim })).at as number;
  log(`trial ${n}: crashed ${victim}`);
  const probes: Probe[] = [];
  const staleSeen: number[] = [];
  let i = 0;
  while (Date.now() - t0 < WATCH_MS) {
    const at = Date.now() - t0;
    const round = apis.flatMap((a) => [
      timed(() => a.coord.readNamespacedLease({ name: "kube-scheduler", namespace: "kube-system" })),
      timed(() =>
        a.core.createNamespacedConfigMap({
          namespace: "default",
          body: { metadata: { name: `api-stall-${process.pid}-${n}-${a.node}-${i}` } },
        }),
      ),
    ]);
    // the observers' heartbeats as detect reads them (one LIST), through each survivor
    const ages = apis.map((a) =>
      timedValue(() => a.coord.listNamespacedLease({ namespace: "fastfence-system" })).then((list) => {
        if (!list) return;
        for (const s of survivors) {
          const l = list.items.find((x) => x.metadata?.name === heartbeatLeaseName(s.name));
          const renew = l?.spec?.renewTime ? new Date(l.spec.renewTime as unknown as string).getTime() : NaN;
          if (!(Date.now() - renew <= STALE_MS)) staleSeen.push(at);
        }
      }),
    );
    const [oks] = await Promise.all([Promise.all(round), Promise.all(ages)]);
    for (const ok of oks) probes.push({ at, ok });
    i++;
    await new Promise((r) => setTimeout(r, 250));
  }
  // The victim's incident, once released (or its times so far after RELEASE_WAIT_MS): one
  // opened after the crash, or one still open at the crash (suspected during an earlier
  // trial's stall, when the victim's kubelet could not renew: confirmed by this crash).
  const custom = admin.makeApiClient(CustomObjectsApi);
  type Fences = { items: { spec: { nodeName: string }; status?: { timestamps?: Record<string, string> } }[] };
  const incidentTimes = async () =>
    (
      (await custom.listNamespacedCustomObject({
        group: "fastfence.io",
        version: "v1alpha1",
        namespace: "fastfence-system",
        plural: "nodefences",
      })) as Fences
    ).items
      .filter((f) => f.spec.nodeName === victim)
      .map((f) => f.status?.timestamps ?? {})
      .find((t) => {
        const ended = [t.recovered, t.closed, t.released].filter((x): x is string => !!x);
        return t.suspected !== undefined && ended.every((x) => Date.parse(x) >= t0);
      });
  const ts = await until(
    `${victim}'s incident released`,
    async () => ((await incidentTimes())?.released ? incidentTimes() : undefined),
    Math.max(0, RELEASE_WAIT_MS - (Date.now() - t0)),
    1000,
  ).catch(() => incidentTimes().catch(() => undefined));
  const since = (k: string) => (ts?.[k] ? Date.parse(ts[k]) - t0 : undefined);
  const bad = probes.filter((p) => !p.ok);
  const r: Trial = {
    victim,
    requests: probes.length,
    unanswered: bad.length,
    lastUnansweredMs: bad.length ? Math.max(...bad.map((p) => p.at)) : 0,
    heartbeatStaleUntilMs: staleSeen.length ? Math.max(...staleSeen) : 0,
    ...(since("suspected") !== undefined ? { suspectedMs: since("suspected") } : {}),
    ...(since("confirmed") !== undefined ? { confirmedMs: since("confirmed") } : {}),
    ...(since("fencedOff") !== undefined ? { provenMs: since("fencedOff") } : {}),
    ...(since("released") !== undefined ? { releasedMs: since("released") } : {}),
  };
  log(
    `trial ${n}: ${r.unanswered}/${r.requests} requests unanswered within ${TIMEOUT_MS} ms, the last begun ` +
      `${r.lastUnansweredMs} ms after the crash; a survivor's heartbeat read > ${STALE_MS} ms old until ` +
      `${r.heartbeatStaleUntilMs} ms; incident: suspected ${r.suspectedMs ?? "-"} ms, confirmed ${r.confirmedMs ?? "-"} ms, ` +
      `power-off proven ${r.provenMs ?? "-"} ms, released ${r.releasedMs ?? "-"} ms`,
  );
  await labControl("/power-cycle", { node: victim });
  return r;
}

let ours = false;
try {
  if (!values.reuse) {
    log("lab up (compact control plane)");
    labCli(["up"], 420_000);
    ours = true;
  }
  const admin = new KubeConfig();
  admin.loadFromFile(readState()!.kubeconfig!);
  const trials: Trial[] = [];
  for (let n = 1; n <= TRIALS; n++) trials.push(await trial(admin, n));
  const of = (k: keyof Trial) => trials.map((t) => t[k]).filter((x): x is number => typeof x === "number");
  const result = {
    trials: trials.length,
    victim: values.victim,
    timeoutMs: TIMEOUT_MS,
    // Over the trials (lab/bench-chart.ts percentiles): n, p50, p95, p99, max.
    unansweredShare: percentiles(trials.map((t) => t.unanswered / t.requests)),
    stallEndMs: percentiles(of("lastUnansweredMs")),
    heartbeatStaleUntilMs: percentiles(of("heartbeatStaleUntilMs")),
    suspectedMs: percentiles(of("suspectedMs")),
    confirmedMs: percentiles(of("confirmedMs")),
    releasedMs: percentiles(of("releasedMs")),
    perTrial: trials,
  };
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  if (ours) labDown();
}
process.exit(0); // abandoned requests to the dead node's address would hold the process open
