// The checkout stands on its own: `fastfence lab up` / `lab down` and the deploy tests run
// in a private mount namespace where the checkout's parent directory is an empty tmpfs
// holding nothing but the checkout itself, so any read of a path beside the checkout (a
// sibling folder of CRDs, a development machine's layout) fails there. Root only (mount
// namespaces, and the lab needs network namespaces). The namespace, and every mount in it,
// ends with the shell that made it; the host's view of the parent directory is untouched.
import { spawnSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { basename, dirname } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../harness/env/index.ts";

const CHECKOUT = realpathSync(ROOT);
const PARENT = dirname(CHECKOUT);
const isRoot = process.getuid?.() === 0;

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
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("VITEST") && k !== "TEST" && k !== "NODE_ENV"),
  );
  return spawnSync("unshare", ["--mount", "--propagation", "private", "bash", "-c", script], {
    encoding: "utf8",
    timeout: timeoutMs,
    env,
    cwd: "/",
  });
}

describe.skipIf(!isRoot || PARENT === "/")("a checkout with nothing beside it", () => {
  it("runs `lab up` / `lab down` and the deploy tests", { timeout: 900_000 }, () => {
    const r = inIsolatedParent(
      `
trap 'node cli/main.ts lab down >/dev/null 2>&1 || true' EXIT
node cli/main.ts lab up
status=$(node cli/main.ts lab status -o json)
grep -q '"ready": "True"' <<<"$status" && echo LAB-READY
node cli/main.ts lab down && echo LAB-DOWN
node node_modules/vitest/vitest.mjs run --project integration test/integration/deploy- && echo DEPLOY-PASSED
`,
      880_000,
    );
    const out = `${r.stdout}\n${r.stderr}`;
    expect(r.status, out.slice(-4000)).toBe(0);
    expect(out).toContain(`PARENT-LISTING: ${basename(CHECKOUT)} \n`);
    expect(out).toContain("LAB-READY");
    expect(out).toContain("LAB-DOWN");
    expect(out).toContain("DEPLOY-PASSED");
    // The host still sees the real parent directory.
    expect(spawnSync("ls", ["-A", PARENT], { encoding: "utf8" }).stdout.split("\n")).toContain(
      basename(CHECKOUT),
    );
  });
});
