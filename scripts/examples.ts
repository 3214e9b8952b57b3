// Readies the extension examples (examples/<name>/, docs/adding-a-function.md) for their
// tests: builds the @fastfence/events package (packages/events/dist: tsc over
// events/index.ts and what it imports) when one of its inputs changed since the last
// build, and runs `npm ci` in each example whose package-lock.json changed since its last
// install (or that has none). Each keeps a hash of its inputs next to its output, so a
// second run does nothing. Run by scripts/setup.sh (step `examples`) and by
// test/examples before an example's own tests. Writes only packages/events/dist and
// examples/*/node_modules; never touches the root node_modules.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

export const ROOT = join(import.meta.dirname, "..");
export const EVENTS_PACKAGE = join(ROOT, "packages/events");
const EVENTS_ENTRY = join(ROOT, "events/index.ts");
const STAMP = ".inputs-sha256";

/** Relative modules `entry` imports, transitively (import and export … from "./x.ts"). */
export function moduleClosure(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of readFileSync(file, "utf8").matchAll(/\bfrom\s+"(\.{1,2}\/[^"]+)"/g))
      todo.push(join(dirname(file), m[1]!));
  }
  return [...seen].sort();
}

function sha256(files: readonly string[], extra = ""): string {
  const h = createHash("sha256").update(extra);
  for (const f of files) h.update(relative(ROOT, f)).update("\0").update(readFileSync(f)).update("\0");
  return h.digest("hex");
}

/** Runs a command to completion; on failure throws with everything it printed. */
function run(cmd: string, args: readonly string[], cwd: string): void {
  try {
    execFileSync(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; status?: number | null };
    throw new Error(
      `${cmd} ${args.join(" ")} (in ${relative(ROOT, cwd) || "."}) exited ${e.status ?? "abnormally"}:\n${e.stdout ?? ""}${e.stderr ?? ""}`,
      { cause: err },
    );
  }
}

function stampOf(path: string): string | undefined {
  return existsSync(path) ? readFileSync(path, "utf8").trim() : undefined;
}

/** The hash of everything the events package's build reads. */
export function eventsPackageKey(): string {
  const tsc = JSON.parse(readFileSync(join(ROOT, "node_modules/typescript/package.json"), "utf8")) as {
    version: string;
  };
  return sha256(
    [
      ...moduleClosure(EVENTS_ENTRY),
      join(ROOT, "tsconfig.json"),
      join(EVENTS_PACKAGE, "tsconfig.json"),
      join(EVENTS_PACKAGE, "package.json"),
    ],
    `typescript ${tsc.version}`,
  );
}

/** Builds packages/events/dist unless it was built from the current inputs; true if it built. */
export function ensureEventsPackage(log: (line: string) => void = () => undefined): boolean {
  const dist = join(EVENTS_PACKAGE, "dist");
  const key = eventsPackageKey();
  if (stampOf(join(dist, STAMP)) === key) return false;
  log("building @fastfence/events (packages/events/dist)");
  rmSync(dist, { recursive: true, force: true });
  run(
    process.execPath,
    [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(EVENTS_PACKAGE, "tsconfig.json")],
    ROOT,
  );
  writeFileSync(join(dist, STAMP), `${key}\n`);
  return true;
}

/** Every examples/<name> folder with a package-lock.json. */
export function exampleDirs(): string[] {
  const base = join(ROOT, "examples");
  if (!existsSync(base)) return [];
  return readdirSync(base, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(base, d.name, "package-lock.json")))
    .map((d) => join(base, d.name))
    .sort();
}

/** Runs `npm ci` in `dir` unless node_modules was installed from this package-lock.json. */
export function ensureExampleInstalled(dir: string, log: (line: string) => void = () => undefined): boolean {
  const key = sha256([join(dir, "package-lock.json"), join(dir, "package.json")]);
  const stamp = join(dir, "node_modules", STAMP);
  if (stampOf(stamp) === key) return false;
  log(`npm ci in ${relative(ROOT, dir)}`);
  run("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], dir);
  writeFileSync(stamp, `${key}\n`);
  return true;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const log = (line: string) => process.stderr.write(`[examples] ${line}\n`);
  ensureEventsPackage(log);
  for (const dir of exampleDirs()) ensureExampleInstalled(dir, log);
}
