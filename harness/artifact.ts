// The shipped artifact as the tests, the lab and the benches run it: `npm pack` of the
// checkout (package.json "files": the product's folders only), unpacked into a plain
// directory outside the checkout (Node refuses to strip types under node_modules) with
// production dependencies only, installed from package-lock.json as the image installs
// them (Containerfile). Content-addressed: the directory is named by the tarball's
// SHA-256, so an unchanged tree reuses it and a build never changes a directory that
// another run may be using. It writes only .cache/artifact and the artifact root.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  utimesSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { CACHE, EnvError, ROOT } from "./env/base.ts";

/** Where unpacked artifacts live: outside every checkout, shared by content hash. */
export const ARTIFACT_ROOT = process.env.FASTFENCE_ARTIFACT_ROOT ?? "/var/tmp/fastfence-artifact";
/** The packed artifact (`make artifact`); the Containerfile installs this file. */
export const ARTIFACT_TARBALL = join(CACHE, "artifact", "fastfence.tgz");
/** The product's folders, as package.json "files" lists them; each must be in the artifact. */
export const PRODUCT_FOLDERS = ["app", "bin", "cli", "core", "events", "functions", "infra", "source"];

export interface Artifact {
  /** The unpacked artifact: run `node <dir>/cli/main.ts` or import `<dir>/app/index.ts`. */
  dir: string;
  tarball: string;
  version: string;
  /** SHA-256 of the tarball (npm pack output is reproducible: fixed mtimes, sorted entries). */
  sha256: string;
}

/** What ARTIFACT.json in an unpacked artifact says; the bench and demo reports quote it. */
export interface ArtifactStamp {
  version: string;
  sha256: string;
  builtAt: string;
}

function run(cmd: string, args: string[], cwd: string, what: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new EnvError(
      `artifact: ${what} failed (${cmd} ${args.join(" ")}, exit ${r.status ?? r.signal}): ${(r.stderr || r.stdout || String(r.error ?? "")).trim().slice(-2000)}`,
    );
  return r.stdout;
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** Production dependencies for this lockfile, installed once per lockfile under the artifact root. */
function productionDeps(log: (s: string) => void): string {
  const lock = join(ROOT, "package-lock.json");
  const deps = join(ARTIFACT_ROOT, `deps-${sha256(lock).slice(0, 16)}`);
  if (existsSync(join(deps, ".complete"))) return join(deps, "node_modules");
  log(`artifact: installing production dependencies (npm ci --omit=dev) into ${deps}`);
  const tmp = `${deps}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  cpSync(join(ROOT, "package.json"), join(tmp, "package.json"));
  cpSync(lock, join(tmp, "package-lock.json"));
  run(
    "npm",
    ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
    tmp,
    "npm ci --omit=dev",
  );
  writeFileSync(join(tmp, ".complete"), "");
  // Another process (the other test lane, a worktree sharing .cache) may have finished
  // first: keep its copy, which its unpacking may be linking from right now.
  if (!existsSync(join(deps, ".complete"))) {
    rmSync(deps, { recursive: true, force: true }); // a partial copy of a killed run
    try {
      renameSync(tmp, deps);
    } catch (err) {
      if (!existsSync(join(deps, ".complete"))) throw err;
    }
  }
  rmSync(tmp, { recursive: true, force: true });
  return join(deps, "node_modules");
}

/** Remove unpacked artifacts nobody has used for a day (ensureArtifact marks a use; never `keep`). */
function prune(keep: string): void {
  const dayAgo = Date.now() - 86_400_000;
  for (const name of readdirSync(ARTIFACT_ROOT)) {
    const p = join(ARTIFACT_ROOT, name);
    if (p === keep || !name.startsWith("fastfence-")) continue;
    try {
      if (statSync(p).mtimeMs < dayAgo) rmSync(p, { recursive: true, force: true });
    } catch {
      // another run removed it first
    }
  }
}

/**
 * Packs the checkout and returns the unpacked artifact, building it only when the packed
 * content changed. `omit` (tests only) leaves product folders out of the unpacked copy, to
 * show that a missing folder is caught.
 */
export function ensureArtifact(opts: { log?: (s: string) => void; omit?: string[] } = {}): Artifact {
  const log = opts.log ?? (() => undefined);
  const out = join(CACHE, "artifact");
  mkdirSync(ARTIFACT_ROOT, { recursive: true });
  // Packed into a directory of this process's own, so concurrent runs (worktrees sharing a
  // .cache) never read each other's tarball.
  const packDir = join(out, `pack-${process.pid}`);
  rmSync(packDir, { recursive: true, force: true });
  mkdirSync(packDir, { recursive: true });
  try {
    const packed = JSON.parse(
      run("npm", ["pack", "--json", "--pack-destination", packDir], ROOT, "npm pack"),
    ) as { filename: string; version: string }[];
    const file = join(packDir, packed[0]!.filename);
    const version = packed[0]!.version;
    const sum = sha256(file);
    // The file the Containerfile installs, replaced atomically.
    cpSync(file, `${ARTIFACT_TARBALL}.${process.pid}`);
    renameSync(`${ARTIFACT_TARBALL}.${process.pid}`, ARTIFACT_TARBALL);
    const omit = opts.omit ?? [];
    const suffix = omit.length ? `-without-${omit.join("-")}` : "";
    const dir = join(ARTIFACT_ROOT, `fastfence-${version}-${sum.slice(0, 16)}${suffix}`);
    const artifact = { dir, tarball: ARTIFACT_TARBALL, version, sha256: sum };
    if (existsSync(join(dir, "ARTIFACT.json"))) {
      // Marks it used now: prune() goes by this time, and a run may use it for hours.
      const now = new Date();
      utimesSync(dir, now, now);
      return artifact;
    }
    log(`artifact: unpacking fastfence ${version} (${sum.slice(0, 16)}) into ${dir}`);
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    run("tar", ["xzf", file, "-C", tmp, "--strip-components=1"], ROOT, "unpacking the tarball");
    for (const folder of PRODUCT_FOLDERS)
      if (!existsSync(join(tmp, folder)))
        throw new EnvError(
          `artifact: the packed artifact lacks the product folder ${folder}/ (package.json "files")`,
        );
    for (const folder of omit) rmSync(join(tmp, folder), { recursive: true, force: true });
    // Hard links: the same files as the shared install, at no copy cost, in a plain directory.
    run("cp", ["-al", productionDeps(log), join(tmp, "node_modules")], ROOT, "linking node_modules");
    run("chmod", ["-R", "a+rX", tmp], ROOT, "making the artifact world-readable");
    const stamp: ArtifactStamp = { version, sha256: sum, builtAt: new Date().toISOString() };
    writeFileSync(join(tmp, "ARTIFACT.json"), JSON.stringify(stamp, null, 2) + "\n");
    try {
      renameSync(tmp, dir);
    } catch (err) {
      // Another run unpacked the same content first: use theirs.
      rmSync(tmp, { recursive: true, force: true });
      if (!existsSync(join(dir, "ARTIFACT.json"))) throw err;
    }
    prune(dir);
    return artifact;
  } finally {
    rmSync(packDir, { recursive: true, force: true });
  }
}

/** The stamp of an unpacked artifact (what the reports quote). */
export function artifactStamp(dir: string): ArtifactStamp {
  return JSON.parse(readFileSync(join(dir, "ARTIFACT.json"), "utf8")) as ArtifactStamp;
}
