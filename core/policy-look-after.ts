// The FencingPolicy's settings for the look after the power-off (spec.lookAfter, issue 18):
// how long fence keeps watching a node whose power-off was read back as Off for signs that
// it still runs (functions/fence/look-after.pure.ts). Kept beside core/policy.ts, which
// composes it into the spec schema. Declarations only: no I/O.
import { z } from "zod";

export const LookAfterSettingsSchema = z
  .object({
    // How long after a read-back Off fence keeps looking for the node's heartbeat with the
    // incident's boot ID (a renewal proves the BMC's Off false: an alarm, then the next
    // level). Unit: ms. Default 300000 (5 min). 0 turns the look after off. Longer catches
    // a node that resumes late (a long hang behind a lying BMC), at the cost of one view
    // read per reconcile interval per fenced incident while it lasts; shorter ends that
    // sooner and misses a node that resumes after it.
    windowMs: z.int().min(0).max(86_400_000).default(300_000),
  })
  .prefault({});
