// The reset step of a trial: put the lab back so the next trial starts from a healthy
// cluster. Undo the fault (resume, heal), power the victim back on if it was fenced (or
// power-cycle it when the scenario broke its processes; the power-on also brings back the
// link a silent crash took down, lab/link-state.ts), delete the trial's workloads,
// then wait until the victim is Ready, untainted, its agent ready, every broker back, no
// incident about it open and, on the compact plane, its etcd member and API server serving; a victim fenced again while it rebooted is powered on again
// and counted. It only drives the lab; it never fences anything itself.
import { sleep } from "../harness/env/base.ts";
import { membersOf } from "./compact-plane.ts";
import { apiReady, etcdStatus } from "./cp-status.ts";
import { listIncidents } from "./event-log.ts";
import type { Lab } from "./lab.ts";
import { SCENARIOS, type Scenario } from "./scenarios.ts";
import type { AgentStatus } from "./types.ts";
import { deleteWorkloads } from "./workloads.ts";

const OPEN_PHASES = ["Confirmed", "Fencing", "FencedOff", "Released", "FenceFailed"];
const OUT_OF_SERVICE = "node.kubernetes.io/out-of-service";

/**
 * Whether the node's agent is ready in its current boot: its agent.json survives a power-off,
 * so a "ready" written before the node's last power-on is stale (chaos seed 117 began while
 * node-a's agent was still starting after the previous reset, and its fn-crash was refused).
 */
export function agentReadySinceBoot(
  status: Pick<AgentStatus, "ready" | "startedAt"> | undefined,
  powerLog: readonly { at: number; action: "off" | "on" }[],
): boolean {
  if (status?.ready !== true) return false;
  const lastOn = powerLog.filter((p) => p.action === "on").at(-1)?.at ?? 0;
  return Date.parse(status.startedAt) >= lastOn;
}

/** Put the lab back; resolves to how often the victim was fenced again while it rebooted. */
export async function resetAfter(
  lab: Lab,
  scenario: Scenario,
  victim: string,
  sfx: string,
  live: (l: string) => void = () => undefined,
): Promise<number> {
  const spec = SCENARIOS[scenario];
  let refenced = 0;
  const t = Date.now();
  const x = lab.node(victim);
  await spec.undo?.(lab, victim);
  const power = await lab.powerState(victim);
  if (power === "Off") await lab.powerOn(victim);
  else if (spec.powerCycle) await lab.powerCycle(victim);
  await deleteWorkloads(lab, sfx);
  // Healthy again: Ready, no out-of-service taint, its agent ready, all brokers back.
  const member = lab.opts.controlPlane === "compact" && membersOf(lab.nodes).some((m) => m.name === victim);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const node = await lab.core.readNode({ name: victim }).catch(() => undefined);
    const ready = node?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    const tainted = (node?.spec?.taints ?? []).some((tt) => tt.key === OUT_OF_SERVICE);
    const agent = lab.opts.fastfence === false || agentReadySinceBoot(lab.agentStatus(x), x.powerLog);
    let brokers = 0;
    try {
      brokers = (await lab.kafkaMeta()).brokers;
    } catch {
      brokers = 0;
    }
    const open = (await listIncidents(lab)).filter(
      (i) => i.spec.nodeName === victim && OPEN_PHASES.includes(i.status?.phase ?? "Closed"),
    );
    // The next trial's set-up writes through the API: a member still rejoining (its etcd
    // catching up, its API server not ready) fails those writes.
    const plane = member ? await memberServing(x.ip) : "n/a";
    if (ready && !tainted && agent && brokers === lab.nodes.length && open.length === 0 && plane !== "no")
      break;
    if (Date.now() > deadline)
      throw new Error(
        `lab reset: ${victim} not healthy after 120 s (ready ${ready}, tainted ${tainted}, agent ${agent}, brokers ${brokers}, control-plane member serving ${plane}, open incidents ${open.map((i) => `${i.metadata.name}:${i.status?.phase}`).join(",")})`,
      );
    if ((await lab.powerState(victim)) === "Off") {
      // Fenced again while rebooting (a healthy, booting node): note it and power on again.
      refenced++;
      live(`  (reset: ${victim} was powered off again while it rebooted; powering on)`);
      await lab.powerOn(victim);
    }
    if (tainted && Date.now() - t > 30_000) {
      // recover did not clear it (e.g. the node never really went down): clear it by hand.
      node!.spec!.taints = node!.spec!.taints!.filter((tt) => tt.key !== OUT_OF_SERVICE);
      await lab.core.replaceNode({ name: victim, body: node! }).catch(() => undefined);
    }
    await sleep(500);
  }
  // Give the rebooted broker a moment to take its preferred leaderships back.
  await sleep(6000);
  live(`  (lab reset in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
  return refenced;
}

/** Whether the node's etcd member answers its status and its API server is ready. */
async function memberServing(ip: string): Promise<"yes" | "no"> {
  const [etcd, api] = await Promise.all([etcdStatus(ip), apiReady(ip)]);
  return etcd && api ? "yes" : "no";
}
