// The hang-mid-round fault (issue 14: a node frozen while a round is under way): as an
// operator would with `fastfence fence NODE --reason`, the bench asks fastfence to fence
// the victim (cli/fence.ts requestFence, under the lab's admin identity), waits until the
// incident is confirmed — fence.requested is on its way and the round is starting — and
// at that moment freezes every process of the node (faults.ts hang). The rest of the
// round, the power-off and the release then cross a frozen broker (a frozen KRaft
// controller when the victim is the controller's node) and a frozen replica of every stage.
// It never powers anything off itself: fastfence does, as it would for a real request.
import { importApp } from "../harness/shipped-app.ts";
import { sleep } from "../harness/env/base.ts";
import { listIncidents } from "./event-log.ts";
import type { Lab } from "./lab.ts";
import { NAMESPACE } from "./types.ts";

/** How long the confirmation of the request may take before the trial gives up. */
const CONFIRMED_WITHIN_MS = 30_000;
/** Poll interval while waiting for the confirmation: the round starts 0.1-0.3 s after it. */
const POLL_MS = 20;

/** The request was not confirmed in time: the trial failed before its fault (the bench runs another). */
export class MidRoundTimeoutError extends Error {
  override name = "MidRoundTimeoutError";
}

/** The reason the request carries (it shows in the incident and its Events). */
export const MID_ROUND_REASON = "lab bench: the node freezes while this round is under way";

/**
 * Request the victim's fencing, wait until its incident is confirmed, freeze the node;
 * resolves to the time of the freeze (ms epoch), which the trial measures from.
 */
export async function hangMidRound(lab: Lab, victim: string): Promise<number> {
  if (!lab.state.artifact) throw new Error("hang-mid-round: the lab records no artifact");
  const app = await importApp(lab.state.artifact.dir);
  const asked = Date.now();
  const r = await app.operatorFence(lab.kc, {
    node: victim,
    reason: MID_ROUND_REASON,
    namespace: NAMESPACE,
    policy: "default",
    command: "bench",
  });
  const deadline = asked + CONFIRMED_WITHIN_MS;
  while (Date.now() < deadline) {
    const incs = await listIncidents(lab, victim).catch(() => []);
    const mine = incs.find((i) => i.metadata.name === r.incident);
    if (mine?.status?.timestamps.confirmed) return lab.hang(victim);
    await sleep(POLL_MS);
  }
  throw new MidRoundTimeoutError(
    `hang-mid-round: the request to fence ${victim} (incident ${r.incident}) was not confirmed within ${CONFIRMED_WITHIN_MS / 1000} s`,
  );
}
