// Regenerates the CRDs in knative/base/crds from the zod schemas (core/crdschema.ts),
// keeping each file's leading comment, formatted by prettier as `make lint` checks. `--check` changes nothing and exits 1 when a file
// differs from what the schemas give (test/unit/events/crds.test.ts checks the same).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { dump } from "js-yaml";
import { format, resolveConfig } from "prettier";
import { fencedNodeSetCrd, fencingPolicyCrd, nodeFenceCrd } from "../core/crdschema.ts";

const DIR = join(dirname(fileURLToPath(import.meta.url)), "../knative/base/crds");
const check = process.argv.includes("--check");
let stale = 0;
for (const [file, crd] of [
  ["nodefence.yaml", nodeFenceCrd],
  ["fencingpolicy.yaml", fencingPolicyCrd],
  ["fencednodeset.yaml", fencedNodeSetCrd],
] as const) {
  const path = join(DIR, file);
  const old = readFileSync(path, "utf8");
  const lines = old.split("\n");
  const header = lines
    .slice(
      0,
      lines.findIndex((l) => !l.startsWith("#")),
    )
    .join("\n");
  const raw = `${header}\n${dump(crd(), { lineWidth: 110, noRefs: true })}`;
  // formatted as `make lint` (prettier --check) expects
  const text = await format(raw, { ...(await resolveConfig(path)), filepath: path });
  if (text === old) continue;
  stale++;
  if (check) console.error(`${path} differs from core/crdschema.ts: run node scripts/gen-crds.ts`);
  else writeFileSync(path, text);
}
if (check && stale) process.exit(1);
