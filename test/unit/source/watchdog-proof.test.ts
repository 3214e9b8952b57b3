// The watchdog proof cannot be bent (issue "least privilege and proofs that cannot be
// bent", item 2), on the agent's side (source/watchdog-agent.ts) with fence's rule
// (functions/fence/watchdog-level.pure.ts): (a) the agent's report states the grace and
// the timeout it really uses, and fence waits for the longest grace any source states, so
// it never counts a node as reset while its agent may still pet; (c) the reported timeout
// comes from the device only — a path that is not a watchdog character device (a regular
// file, /dev/null, a FIFO) is reported "not armed" whatever a Node annotation or
// FASTFENCE_WATCHDOG_TIMEOUT_MS says, and the lab's FIFO counts only in the explicit
// emulation mode. Real files in a temporary directory and the lab's emulated FIFO; never a
// real watchdog device.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { formatWatchdogReport, parseWatchdogReport, WATCHDOG_ANNOTATION } from "../../../core/watchdog.ts";
import { watchdogStep } from "../../../functions/fence/watchdog-level.pure.ts";
import { createLogger } from "../../../infra/log.ts";
import { EmulatedWatchdog } from "../../../lab/watchdog.ts";
import { startWatchdogAgent, type WatchdogAgentConfig } from "../../../source/watchdog-agent.ts";

const dir = mkdtempSync(join(tmpdir(), "ff-wd-proof-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const log = createLogger("watchdog-proof-test", { level: "silent" });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An agent on `config`, renewed once; its report once the open was tried. */
async function reportOf(config: WatchdogAgentConfig, nodeTimeoutMs?: number) {
  const agent = await startWatchdogAgent({
    config,
    node: "node-a",
    bootId: () => "boot-1",
    clusterSize: () => 3,
    nodeTimeout: () => ({ ok: true, timeoutMs: nodeTimeoutMs }),
    log,
  });
  try {
    agent.onRenewed();
    for (let i = 0; i < 40 && agent.report().reason?.startsWith("waiting"); i++) await sleep(25);
    await sleep(50);
    return parseWatchdogReport(agent.annotations()[WATCHDOG_ANNOTATION]);
  } finally {
    await agent.stop();
  }
}

describe("(a) the grace: the agent states what it uses, fence waits for the longest", () => {
  it("an agent petting 5 s after its last renewal under a policy that assumes 2 s: no release before 5 s + timeout + margin", async () => {
    const wd = new EmulatedWatchdog(join(dir, "grace"), 60_000, () => undefined);
    wd.start();
    try {
      // The shipped agent default (FASTFENCE_WATCHDOG_RENEW_GRACE_MS 5000); the policy's default 2000.
      const config = {
        devicePath: wd.path,
        timeoutMs: 1_000,
        renewGraceMs: 5_000,
        petIntervalMs: 100,
        emulation: "lab-fifo",
      } as WatchdogAgentConfig;
      const parsed = await reportOf(config);
      expect(parsed).toMatchObject({ ok: true, report: { armed: true, timeoutMs: 1_000 } });
      if (!parsed.ok) return;
      expect(parsed.report.renewGraceMs).toBe(5_000);
      // fence's watch: the last renewal seen at 1000 on its clock; policy grace 2000, margin 1500.
      const plan = { level: 0, bootId: "boot-1", renewGraceMs: 2_000, marginMs: 1_500 };
      const seen = {
        report: formatWatchdogReport(parsed.report),
        watchSyncedSince: 0,
        lastRenewalSeenAt: 1_000,
        lastVouchSeenAt: undefined,
      };
      // The agent may pet until 1000 + 5000; its watchdog fires by 1000 + 5000 + 1000.
      const early = watchdogStep(plan, seen, 1_000 + 2_000 + 1_000 + 1_500, 60_000);
      expect(early.kind).toBe("wait");
      const due = watchdogStep(plan, seen, 1_000 + 5_000 + 1_000 + 1_500, 60_000);
      expect(due).toMatchObject({ kind: "expired", proof: { renewGraceMs: 5_000, timeoutMs: 1_000 } });
    } finally {
      wd.stop();
    }
  });
});

describe("(c) the timeout comes from the device only", () => {
  const settings = { timeoutMs: 10_000, renewGraceMs: 2_000, petIntervalMs: 100 };

  it("a regular file is not a watchdog: not armed, whatever the Node annotation says", async () => {
    const file = join(dir, "watchdog");
    writeFileSync(file, "");
    const r = await reportOf({ devicePath: file, ...settings }, 10_000);
    expect(r).toMatchObject({ ok: true, report: { armed: false } });
  });

  it("/dev/null is a character device but no watchdog: not armed", async () => {
    const r = await reportOf({ devicePath: "/dev/null", ...settings }, 10_000);
    expect(r).toMatchObject({ ok: true, report: { armed: false } });
  });

  it("the lab's FIFO without the emulation mode: not armed", async () => {
    const wd = new EmulatedWatchdog(join(dir, "fifo-plain"), 60_000, () => undefined);
    wd.start();
    try {
      const r = await reportOf({ devicePath: wd.path, ...settings }, 10_000);
      expect(r).toMatchObject({ ok: true, report: { armed: false } });
      expect(wd.armed()).toBe(false);
    } finally {
      wd.stop();
    }
  });

  it("the lab's FIFO in the emulation mode: armed with the emulation's timeout", async () => {
    const wd = new EmulatedWatchdog(join(dir, "fifo-lab"), 60_000, () => undefined);
    wd.start();
    try {
      const config = { devicePath: wd.path, ...settings, emulation: "lab-fifo" } as WatchdogAgentConfig;
      const r = await reportOf(config);
      expect(r).toMatchObject({
        ok: true,
        report: { armed: true, timeoutMs: 10_000, renewGraceMs: 2_000 },
      });
    } finally {
      wd.stop();
    }
  });
});
