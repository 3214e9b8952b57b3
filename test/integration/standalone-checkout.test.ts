// Needs real lab, mount namespaces, kustomize: any read beside the checkout must fail.
// The checkout stands on its own: `fastfence lab up` / `lab down` run (and the down leaves
// nothing behind: lab-leftovers.ts, checked from the host), and every
// kustomization under knative/ renders and every third-party CRD file parses (what the
// deploy tests read from disk), in a private mount namespace where the checkout's parent
// directory is an empty tmpfs holding nothing but the checkout itself, so any read of a
// path beside the checkout (a sibling folder of CRDs, a development machine's layout)
// fails there. The deploy tests themselves run once, in the suite (deploy-*.test.ts), not
// again in here. Root only (mount namespaces, and the lab needs network namespaces). The
// namespace, and every mount in it, ends with the shell that made it; the host's view of
// the parent directory is untouched.
import { spawnSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { basename, dirname } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../harness/env/index.ts";
import type { LabState } from "../../lab/state.ts";
import { leftovers, type LabProcess } from "./lab-leftovers.ts";

const CHECKOUT = realpathSync(ROOT);
const PARENT = dirname(CHECKOUT);
const isRoot = process.getuid?.() === 0;

/**
 * Renders every kustomization under knative/ (a Component onto the vanilla overlay) and
 * parses every YAML file of third_party/crds, through the harness the deploy tests use;
 * prints one RENDERED line. Seconds, no servers.
 */
const RENDER_ALL = `
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { KNATIVE_DIR, readYamlDocs, render, renderWith } from "./harness/kustomize.ts";
import { THIRD_PARTY_CRDS } from "./harness/env/base.ts";
const under = (dir) => readdirSync(dir, { recursive: true }).map((f) => join(dir, String(f)));
const kustomizations = under(KNATIVE_DIR).filter((f) => f.endsWith("/kustomization.yaml"));
let objects = 0;
for (const k of kustomizations) {
  const component = /^kind: Component$/m.test(readFileSync(k, "utf8"));
  objects += (component ? renderWith([join(KNATIVE_DIR, "overlays/vanilla")], [dirname(k)]) : render(dirname(k))).length;
}
const crds = under(THIRD_PARTY_CRDS).filter((f) => /\\.ya?ml$/.test(f)).flatMap((f) => readYamlDocs(f)).length;
console.log("RENDERED " + kustomizations.length + " kustomizations, " + objects + " objects; " + crds + " third-party CRD documents");
`;

/** Prints the running lab's state and processes (one LAB-STATE line), for the leftovers check. */
const LAB_STATE = `
import { readState } from "./lab/state.ts";
import { snapshot } from "./test/integration/lab-leftovers.ts";
const state = readState();
console.log("LAB-STATE " + JSON.stringify({ state, procs: snapshot(state) }));
`;

/** Runs `body` (bash) in a mount namespace where PARENT shows only the checkout. */
function inIsolatedParent(body: string, timeoutMs: number) {
  const script = `
set -euo pipefail
checkout=${JSON.stringify(CHECKOUT)}; parent=${JSON.stringify(PARENT)}; name=${JSON.stringify(basename(CHECKOUT))}
# Park the checkout outside the parent, cover the parent with an empty tmpfs, move it back.
# The tmpfs may be the system's temporary directory (a checkout cloned straight into /tmp),
# where etcd and Kafka then keep their data: its size is a limit, not an allocation.
hold=$(mktemp -d -p /dev/shm ff-standalone-XXXXXX)
mount --bind "$checkout" "$hold"
mount -t tmpfs -o size=4g fastfence-isolated "$parent"
mkdir "$parent/$name"
mount --move "$hold" "$parent/$name"
rmdir "$hold"
cd "$parent/$name"
echo "PARENT-LISTING: $(ls -A "$parent" | tr '\\n' ' ')"
${body}
`;
  const env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith("VITEST") && k !== "TEST" && k !== "NODE_ENV",
      ),
    ),
    FF_RENDER_ALL: RENDER_ALL,
    FF_LAB_STATE: LAB_STATE,
  };
  return spawnSync("unshare", ["--mount", "--propagation", "private", "bash", "-c", script], {
    encoding: "utf8",
    timeout: timeoutMs,
    env,
    cwd: "/",
  });
}

describe.skipIf(!isRoot || PARENT === "/")("a checkout with nothing beside it", () => {
  it(
    "runs `lab up` / `lab down`, which leaves nothing behind, and renders every kustomization and third-party CRD",
    { timeout: 600_000 },
    () => {
      const r = inIsolatedParent(
        `
trap 'node cli/main.ts lab down >/dev/null 2>&1 || true' EXIT
node cli/main.ts lab up
status=$(node cli/main.ts lab status -o json)
grep -q '"ready": "True"' <<<"$status" && echo LAB-READY
node --input-type=module -e "$FF_LAB_STATE"
node cli/main.ts lab down && echo LAB-DOWN
node --input-type=module -e "$FF_RENDER_ALL"
`,
        580_000,
      );
      const out = `${r.stdout}\n${r.stderr}`;
      expect(r.status, out.slice(-4000)).toBe(0);
      expect(out).toContain(`PARENT-LISTING: ${basename(CHECKOUT)} \n`);
      expect(out).toContain("LAB-READY");
      expect(out).toContain("LAB-DOWN");
      const lab = /^LAB-STATE (.*)$/m.exec(r.stdout);
      expect(lab, out.slice(-4000)).not.toBeNull();
      const { state, procs } = JSON.parse(lab![1]!) as { state: LabState; procs: LabProcess[] };
      expect(procs.length).toBeGreaterThan(10);
      expect(leftovers(procs, state)).toEqual([]);
      const rendered = /RENDERED (\d+) kustomizations, (\d+) objects; (\d+) third-party CRD documents/.exec(
        out,
      );
      expect(rendered, out.slice(-4000)).not.toBeNull();
      const [kustomizations, objects, crds] = rendered!.slice(1).map(Number);
      expect(kustomizations).toBeGreaterThanOrEqual(18); // knative/: overlays, base parts, components, examples
      expect(objects).toBeGreaterThan(100);
      expect(crds).toBeGreaterThan(10);
      // The host still sees the real parent directory.
      expect(spawnSync("ls", ["-A", PARENT], { encoding: "utf8" }).stdout.split("\n")).toContain(
        basename(CHECKOUT),
      );
    },
  );
});
