// The artifact a lab runs: the packed product unpacked outside the checkout with production
// dependencies only (harness/artifact.ts), built when the packed content changed, and said
// once in the lab's log. Its version and hash go into the lab state, so the demo and bench
// reports can say what they measured. It starts nothing.
import { ensureArtifact } from "../harness/artifact.ts";
import type { LabState } from "./state.ts";

export function labArtifact(log: (line: string) => void): NonNullable<LabState["artifact"]> {
  const a = ensureArtifact({ log });
  log(`artifact: fastfence ${a.version} sha256:${a.sha256.slice(0, 16)} (${a.dir})`);
  return { version: a.version, sha256: a.sha256, dir: a.dir };
}
