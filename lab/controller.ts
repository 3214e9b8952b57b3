// The lab controller daemon behind `fastfence lab up`: brings the lab up in this process
// (it owns the control plane, the Redfish BMC emulators, ipmi_sim and the API relay),
// then serves a small control endpoint on 127.0.0.1 (port recorded in state.json) for
// the other `fastfence lab` commands: status, crash, proc-crash, hang, resume, partition,
// heal, partial, bmc-fault, power-loss, isolate, fn-crash, power-on, power-cycle, down. It
// runs the compact control plane unless FASTFENCE_LAB_CONTROL_PLANE=host. On SIGTERM/SIGINT or POST /down it tears
// everything down and exits. Never listens beyond loopback for control.
import { createServer } from "node:http";
import { isolate, powerLoss, procCrash } from "./faults.ts";
import { Lab, type BmcFault } from "./lab.ts";
import { readState, tearDownOnSignals, writeState } from "./state.ts";
import { SCENARIOS } from "./scenarios.ts";
import { check } from "./trial-check.ts";
import { startOf } from "./trial.ts";
import type { TrialStart } from "./trial-check.ts";

const nodes = Number(process.env.FASTFENCE_LAB_NODES ?? 3);
const bmc = (process.env.FASTFENCE_LAB_BMC ?? "mixed") as "mixed" | "ipmi" | "redfish";
const fastfence = process.env.FASTFENCE_LAB_BASELINE !== "1";
const log = (l: string) => console.log(`${new Date().toISOString()} ${l}`);

let lab: Lab | undefined;
let stopping = false;
async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    log("tearing down");
    const done = await lab?.down().catch((e: unknown) => [String(e)]);
    log(`down: ${JSON.stringify(done ?? [])}`);
  }
  process.exit(code);
}
tearDownOnSignals(["SIGTERM", "SIGINT", "SIGHUP"], 0);

type Handler = (q: URLSearchParams) => Promise<unknown>;
const need = (q: URLSearchParams, k: string) => {
  const v = q.get(k);
  if (!v) throw new Error(`missing ${k}`);
  return v;
};

async function main(): Promise<void> {
  lab = await Lab.up({
    nodes,
    bmc,
    fastfence,
    log,
    watchdog: process.env.FASTFENCE_LAB_WATCHDOG === "1",
    secondLevel: process.env.FASTFENCE_LAB_SECOND_LEVEL === "1",
    controlPlane: process.env.FASTFENCE_LAB_CONTROL_PLANE === "host" ? "host" : "compact",
    leaderElection: process.env.FASTFENCE_LAB_LEADER_ELECTION === "upstream" ? "upstream" : "openshift",
    vmController: process.env.FASTFENCE_LAB_VM_CONTROLLER === "1",
  });
  const l = lab;
  let mark: TrialStart | undefined;
  const routes: Record<string, Handler> = {
    "/status": async () => await l.status(),
    "/crash": async (q) => ({ at: await l.crash(need(q, "node")) }),
    "/proc-crash": async (q) => ({ at: await procCrash(l, need(q, "node")) }),
    "/hang": async (q) => ({ at: l.hang(need(q, "node")) }),
    "/resume": async (q) => ({ at: l.resume(need(q, "node")) }),
    "/partition": async (q) => ({ at: await l.partition(need(q, "node")) }),
    "/heal": async (q) => ({ at: await l.heal(need(q, "node")) }),
    "/power-loss": async (q) => ({ at: await powerLoss(l, need(q, "node")) }),
    "/isolate": async (q) => ({ at: await isolate(l, need(q, "node")) }),
    "/partial": async (q) => ({
      at: await l.partialPartition(need(q, "node"), (q.get("mode") ?? "peers") as "peers" | "api"),
    }),
    "/bmc-fault": async (q) => {
      await l.bmcFault(need(q, "node"), (q.get("fault") ?? "none") as BmcFault);
      return { ok: true };
    },
    "/fn-crash": async (q) =>
      await l.functionCrash(need(q, "node"), (q.get("functions") ?? "").split(",").filter(Boolean), {
        source: q.get("source") === "1",
        ...(q.has("restartAfterMs") ? { restartFunctionsAfterMs: Number(q.get("restartAfterMs")) } : {}),
      }),
    // a trial by hand (the lab tests): /mark before the fault, /check?node=VICTIM after it runs
    // the invariant checker on what happened since (violations, and lying BMCs apart)
    "/mark": async () => ({ at: (mark = await startOf(l, Date.now())).tStart }),
    "/check": async (q) => {
      if (!mark) throw new Error("no /mark yet");
      const c = await check(l, SCENARIOS.hang, {
        victim: need(q, "node"),
        start: mark,
        withObservations: false,
      });
      return {
        violations: c.violations,
        bmcLied: c.bmcLied,
        incidents: c.incidents.map((i) => i.metadata.name),
      };
    },
    "/power-on": async (q) => {
      await l.powerOn(need(q, "node"));
      return { ok: true };
    },
    // a crashed node's power is still on: off and on again through its BMC (the lab tests)
    "/power-cycle": async (q) => {
      await l.powerCycle(need(q, "node"));
      return { ok: true };
    },
  };
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.pathname === "/down") {
      res.writeHead(202).end("{}");
      setTimeout(() => void shutdown(0), 50);
      return;
    }
    const h = routes[u.pathname];
    if (!h) return void res.writeHead(404).end(JSON.stringify({ error: `no route ${u.pathname}` }));
    h(u.searchParams).then(
      (v) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(v)),
      (e: unknown) =>
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ error: e instanceof Error ? e.message : String(e) })),
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  const s = readState();
  if (s) {
    s.controlPort = port;
    s.phase = "ready";
    writeState(s);
  }
  lab.state.controlPort = port;
  log(`lab ready; control on 127.0.0.1:${port}`);
}

main().catch(async (err: unknown) => {
  log(`lab up failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  await shutdown(1);
});
