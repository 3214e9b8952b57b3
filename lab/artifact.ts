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

/** What a report's RESULT says of the artifact: its version and content hash. */
export function artifactRef(a: LabState["artifact"]): { version: string; sha256: string } | null {
  return a ? { version: a.version, sha256: a.sha256 } : null;
}

/** The report's line naming what ran. */
export function artifactLine(a: LabState["artifact"]): string {
  return a
    ? `Ran the packed artifact fastfence ${a.version}, sha256:${a.sha256} (\`make artifact\`; what the Containerfile installs), unpacked with production dependencies only.`
    : "Ran no packed artifact (no fastfence replicas in this lab).";
}
