// Needs real kube-apiserver (+ etcd), Kafka, Linux processes: interrupted starts leave nothing.
// "Interrupting leaves nothing behind": a child test process that started etcd,
// kube-apiserver and a Kafka broker is interrupted (SIGINT after READY, SIGINT in the
// middle of start-up, SIGKILL followed by scripts/reap.sh); afterwards no process of its
// process groups remains, none of its ports listens, and its temp dirs and registry are gone.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  EnvError,
  isListening,
  registrySnapshot,
  ROOT,
  RUN_DIR,
  runCommand,
  sleep,
  startControlPlane,
} from "../../harness/env/index.ts";

interface Ready {
  pid: number;
  groups: number[];
  tempDirs: string[];
  netns: string[];
  ports: number[];
  registry: string;
}

/** Pids of live (non-zombie) processes whose process group is one of `pgids`. */
function livePidsInGroups(pgids: number[]): number[] {
  const want = new Set(pgids);
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (rest[0] !== "Z" && want.has(Number(rest[2]))) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function spawnChild(): { child: ChildProcess; ready: Promise<Ready>; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [join(ROOT, "harness/env/cleanup-child.ts")], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const ready = new Promise<Ready>((res, rej) => {
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n").find((l) => l.startsWith("READY "));
      if (line) res(JSON.parse(line.slice(6)) as Ready);
    });
    child.once("exit", (code, sig) =>
      rej(new Error(`child exited (${code}, ${sig}) before READY:\n${out}\n${err}`)),
    );
  });
  ready.catch(() => undefined); // a test that interrupts start-up never awaits it
  const exited = new Promise<number | null>((res) => child.once("exit", (code) => res(code)));
  return { child, ready, exited };
}

async function until(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(50);
  }
}

async function expectNothingLeft(r: {
  groups: number[];
  tempDirs: string[];
  ports: number[];
  registry: string;
  netns?: string[];
}) {
  expect(r.groups.length).toBeGreaterThan(0);
  await until("process groups gone", () => livePidsInGroups(r.groups).length === 0);
  await until("ports closed", () => r.ports.every((p) => !isListening(p)));
  for (const d of r.tempDirs) expect(existsSync(d), d).toBe(false);
  for (const ns of r.netns ?? []) expect(existsSync(`/run/netns/${ns}`), ns).toBe(false);
  expect(existsSync(r.registry)).toBe(false);
}

describe("test env: interrupting leaves nothing behind", () => {
  it("SIGINT after READY stops every server and removes every temp dir", async () => {
    const t0 = Date.now();
    const { child, ready, exited } = spawnChild();
    const r = await ready;
    console.log(`child READY (etcd + apiserver + 1 kafka broker) in ${Date.now() - t0} ms`);
    expect(r.groups.length).toBe(3);
    expect(r.ports.every((p) => isListening(p))).toBe(true);
    for (const d of r.tempDirs) expect(existsSync(d)).toBe(true);
    expect(existsSync(`/run/netns/${r.netns[0]}`)).toBe(true);
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    await expectNothingLeft(r);
  });

  it("SIGINT in the middle of start-up stops what was started", async () => {
    const { child, exited, ready } = spawnChild();
    // If the child dies before it gets that far, fail with its output instead of a timeout.
    let childGone: unknown;
    ready.catch((err: unknown) => (childGone = err));
    const registry = join(RUN_DIR, `${child.pid}.json`);
    // Wait until etcd and kube-apiserver are running (the broker is not started yet).
    let snap: { groups: { pgid: number }[]; tempDirs: string[] } = { groups: [], tempDirs: [] };
    await until(
      "apiserver spawned",
      () => {
        if (childGone) throw childGone;
        try {
          snap = JSON.parse(readFileSync(registry, "utf8")) as typeof snap;
        } catch {
          return false;
        }
        return snap.groups.length >= 2;
      },
      90_000,
    );
    const groups = snap.groups.map((g) => g.pgid);
    // Ports any of those processes listen on, read from their command lines.
    const ports = groups.flatMap((pid) => {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
        return [...cmd.matchAll(/127\.0\.0\.1:(\d+)|--secure-port=(\d+)/g)].map((m) => Number(m[1] ?? m[2]));
      } catch {
        return [];
      }
    });
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    await expectNothingLeft({ groups, tempDirs: snap.tempDirs, ports, registry });
  });

  it("SIGKILL of the test process, then scripts/reap.sh, leaves nothing behind", async () => {
    const { child, ready, exited } = spawnChild();
    const r = await ready;
    child.kill("SIGKILL");
    await exited;
    // The servers die with their parent (pdeathsig); the temp dirs and registry stay...
    await until("process groups gone", () => livePidsInGroups(r.groups).length === 0);
    expect(existsSync(r.registry)).toBe(true);
    for (const d of r.tempDirs) expect(existsSync(d)).toBe(true);
    expect(existsSync(`/run/netns/${r.netns[0]}`)).toBe(true);
    // ...until reap.sh runs.
    const out = await runCommand(join(ROOT, "scripts/reap.sh"), []);
    expect(out).toContain(`owner ${r.pid} gone`);
    await expectNothingLeft(r);
  });

  it("a failed start stops the parts already started and reports the server's log", async () => {
    const before = registrySnapshot();
    const err = await startControlPlane({ apiserverArgs: ["--no-such-flag=1"], readyTimeoutMs: 20_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EnvError);
    expect((err as EnvError).code).toBe("FF_INTERNAL");
    // The error carries the tail of the server's log.
    expect(String((err as EnvError).message)).toMatch(/kube-apiserver exited[\s\S]*no-such-flag/);
    const after = registrySnapshot();
    expect(after.groups).toEqual(before.groups);
    expect(after.tempDirs).toEqual(before.tempDirs);
  });

  it("reap.sh leaves the records of live test processes alone", async () => {
    const { child, ready, exited } = spawnChild();
    const r = await ready;
    await runCommand(join(ROOT, "scripts/reap.sh"), []);
    expect(existsSync(r.registry)).toBe(true);
    expect(livePidsInGroups(r.groups).length).toBeGreaterThanOrEqual(3);
    for (const d of r.tempDirs) expect(existsSync(d)).toBe(true);
    child.kill("SIGTERM");
    expect(await exited).toBe(143);
    await expectNothingLeft(r);
  });
});
