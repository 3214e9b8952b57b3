// Runs a command of the unpacked artifact as the image runs it, for artifact.test.ts: in a
// private mount namespace where the checkout is hidden (a tmpfs over it), the root is
// read-only, /tmp is an empty tmpfs (HOME=/tmp), as uid/gid 1001, with a clean environment,
// and under Node's permission model allowing reads of the artifact and the config dir only
// (so a read outside the artifact fails with ERR_ACCESS_DENIED instead of passing
// unnoticed). Needs root (unshare, mount, setpriv). Test code: never used by the product.
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { ARTIFACT_ROOT } from "../../harness/artifact.ts";
import { BIN, ROOT } from "../../harness/env/base.ts";

/** What a sandboxed command did. */
export interface SandboxRun {
  args: string[];
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  /** The `waitFor` pattern was seen (then the command was stopped with SIGTERM). */
  matched: boolean;
}

/** Errors that mean the artifact is incomplete or reads outside itself. */
export const ARTIFACT_FAULTS =
  /ERR_MODULE_NOT_FOUND|Cannot find module|Cannot find package|ERR_ACCESS_DENIED|ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING|No such file or directory/;

/** The Node binary the sandbox runs: a copy outside the checkout (the image's node). */
export function sandboxNode(): string {
  const src = realpathSync(join(BIN, "node"));
  const dir = join(ARTIFACT_ROOT, "node-bin");
  const dst = join(dir, "node");
  if (!existsSync(dst)) {
    mkdirSync(dir, { recursive: true });
    copyFileSync(src, `${dst}.${process.pid}`);
    copyFileSync(`${dst}.${process.pid}`, dst);
  }
  return dir;
}

const SCRIPT = `set -e
RUN_PATH="$PATH"; PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs -o size=1m,mode=0755 tmpfs "$FF_HIDE"
mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp
mount -o remount,bind,ro /
cd "$FF_ART"
if [ "$FF_ENTRY" != node ]; then set -- "$FF_ART/bin/$FF_ENTRY" "$@"; else
  set -- "$FF_NODE_DIR/node" --permission --allow-fs-read="$FF_ART/" --allow-fs-read="$FF_CFG/" \\
    --disable-warning=ExperimentalWarning "$FF_ART/cli/main.ts" "$@"; fi
exec setpriv --reuid 1001 --regid 1001 --clear-groups -- \\
  env -u FF_HIDE -u FF_ART -u FF_CFG -u FF_NODE_DIR -u FF_ENTRY PATH="$RUN_PATH" "$@"
`;

/**
 * Runs `fastfence <args>` from artifact `art` in the sandbox. With `waitFor`, stops it
 * (SIGTERM) once its output matches, or after `timeoutMs`; `entry` runs it through a script
 * of bin/ instead of node directly.
 */
export function runSandboxed(
  art: string,
  args: string[],
  opts: {
    env?: Record<string, string>;
    configDir: string;
    waitFor?: RegExp;
    timeoutMs?: number;
    /** node (default): node on cli/main.ts; else a script of the artifact's bin/. */
    entry?: "node" | "fastfence" | "kubectl-fastfence";
  },
): Promise<SandboxRun> {
  const nodeDir = sandboxNode();
  const child = spawn(
    "unshare",
    ["-m", "--propagation", "private", "--", "sh", "-c", SCRIPT, "sh", ...args],
    {
      // The command's whole environment: nothing of this process's leaks in.
      env: {
        HOME: "/tmp",
        NODE_ENV: "production",
        ...opts.env,
        PATH: `${nodeDir}:/usr/bin:/bin`,
        FF_HIDE: ROOT,
        FF_ART: art,
        FF_CFG: opts.configDir,
        FF_NODE_DIR: nodeDir,
        FF_ENTRY: opts.entry ?? "node",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  let matched = false;
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    const take = (b: Buffer) => {
      output += b.toString();
      if (!matched && opts.waitFor?.test(output)) {
        matched = true;
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 3000).unref();
      }
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ args, code, signal, output, matched });
    });
  });
}

/** `fn` over `items`, at most `width` at a time (a start-up is CPU-bound: 2 cores), in order. */
export async function inTurns<T, R>(
  items: readonly T[],
  width: number,
  fn: (x: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  return out;
}
