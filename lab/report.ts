// Lab reports on disk: the demo's, the bench's and chaos' Markdown and SVG files under
// .cache/reports/. The charts themselves are pure functions elsewhere (lab/chart.ts,
// lab/bench-chart.ts); this only writes what it is given. Never reads the lab or the
// cluster itself.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./state.ts";

export const REPORTS_DIR = join(ROOT, ".cache", "reports");

export function writeReport(base: string, files: Record<string, string>): string[] {
  mkdirSync(REPORTS_DIR, { recursive: true });
  return Object.entries(files).map(([ext, text]) => {
    const p = join(REPORTS_DIR, `${base}.${ext}`);
    writeFileSync(p, text);
    return p;
  });
}
