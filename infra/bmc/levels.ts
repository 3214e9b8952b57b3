// Fencing levels: an ordered list of BMC drivers per node (e.g. Redfish, then IPMI, then a
// fence agent). Each level runs powerOffAndConfirm within its own budget, cut to what is
// left of the round's (a level is never started once the round's budget is spent); an
// error or a timeout moves on to the next level; success only when power-off was read back (S1).
// Just before each level's off command the caller's last look (beforeOff) may abandon the
// round: then no off command is sent at that level or any later one.
// Every try is returned as the NodeFence Attempt itself (core/incident.ts: round, level,
// driver, holder, times, result, read-back, error code), the record the incident stores:
// nothing translates it afterwards. Attempts carry codes and secret-free messages only.
// When tracing (infra/tracing.ts), every level is a span under the stage's, and every BMC
// call it makes (prepare, off, each status read) a span under the level's, carrying the
// driver, the secret-free target and the result: never a credential.
import { FastfenceError, type ErrorCode } from "../../core/errors.ts";
import type { Attempt, LastLook } from "../../core/incident.ts";
import { traceChild, tracingActive } from "../tracing.ts";
import {
  attemptResultOf,
  BmcStillOnError,
  powerOffAndConfirm,
  type BmcDriver,
  type OffConfirmed,
} from "./driver.ts";

export interface FencingLevel {
  /** The level's protocol, recorded as the attempt's `driver` (a policy level's `driver`). */
  protocol: Attempt["driver"];
  driver: BmcDriver;
  /** Budget for this level: the off command plus the read-back (cut to what is left of the round). */
  timeoutMs: number;
  pollMs?: number;
  /** Cap of one BMC call (policy timeouts.bmcCallTimeoutMs); see ConfirmOptions. */
  callTimeoutMs?: number;
}

export interface FenceOutcome {
  /** True only when the last attempt is "off-confirmed" (read back Off, S1). */
  confirmed: boolean;
  /** Index of the level that confirmed power-off. */
  level?: number;
  attempts: Attempt[];
}

/** The last look's answer before a level's off command: go, or abandon with what it saw. */
export type OffGateVerdict = { go: true } | { go: false; look: LastLook; message: string };

/** A round the last look stopped before an off command (never retried within the round). */
export class RoundAbandoned extends FastfenceError {
  readonly look: LastLook;
  constructor(look: LastLook, message: string) {
    super("FF_NODE_RESPONDING", message);
    this.look = look;
  }
}

export interface FenceRound {
  /** The incident's fencing round (1-based), recorded on every attempt. */
  round: number;
  /** Who drives it (the lease holder), recorded on every attempt. */
  by: string;
  now: () => number;
  /**
   * When the round's budget (policy timeouts.powerOffTimeoutMs) ends, in `now`'s ms. A level
   * that would start at or after it is not started; a running level gets at most what is
   * left. Default: no round budget, every level its own timeoutMs.
   */
  roundEndsAt?: number;
  signal?: AbortSignal;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * fence's last look, asked just before each level's off command (level 0-based): an
   * abandon ends the round there, with an attempt of result "abandoned" and no off command.
   */
  beforeOff?: (level: number) => Promise<OffGateVerdict>;
  /** Level indexes not to use (they lied: functions/fence/look-after.pure.ts). */
  skip?: readonly number[];
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * S1 once more, on what the attempt will claim: "off-confirmed" only with a read-back of
 * exactly Off and both times known (powerOffAndConfirm reads only after the command; the
 * fence stage checks readBackAt >= commandAt again). Anything else is not a confirmation.
 */
function isReadBackOff(r: OffConfirmed): boolean {
  return (
    r.result === "off-confirmed" &&
    r.readBackState === "Off" &&
    Number.isFinite(r.commandAt) &&
    Number.isFinite(r.readBackAt)
  );
}

export async function fenceWithLevels(levels: FencingLevel[], opts: FenceRound): Promise<FenceOutcome> {
  const attempts: Attempt[] = [];
  for (let i = 0; i < levels.length; i++) {
    const lv = levels[i]!;
    if (opts.skip?.includes(i)) continue;
    if (opts.signal?.aborted) break;
    const left = opts.roundEndsAt === undefined ? Infinity : opts.roundEndsAt - opts.now();
    if (left <= 0) break; // the round's budget is spent: later levels wait for the next round
    const budget = Math.min(lv.timeoutMs, left);
    const base = {
      round: opts.round,
      level: i,
      driver: lv.protocol,
      by: opts.by,
      startedAt: iso(opts.now()),
    };
    const ac = new AbortController();
    const onAbort = () => ac.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    // a hard stop for this level even if a driver ignores its per-call timeout
    const hard = setTimeout(() => ac.abort(new Error("level timeout")), budget + 1000);
    try {
      const traced = tracingActive();
      const level = {
        "fastfence.bmc.level": i,
        "fastfence.bmc.driver": lv.protocol,
        "fastfence.bmc.target": lv.driver.target,
        "fastfence.round": opts.round,
      };
      const run = () =>
        powerOffAndConfirm(traced ? tracedDriver(lv.driver) : lv.driver, {
          timeoutMs: budget,
          pollMs: lv.pollMs ?? 200,
          callTimeoutMs: lv.callTimeoutMs,
          now: opts.now,
          signal: ac.signal,
          sleep: opts.sleep,
          ...(opts.beforeOff ? { beforeOff: () => gate(opts.beforeOff!, i) } : {}),
        });
      const r = traced
        ? await traceChild("fastfence.bmc power-off level", level, run, (o) => ({
            "fastfence.bmc.result": o.result,
            "fastfence.bmc.off_commands": o.offCommands,
            "fastfence.bmc.readbacks": o.readbacks.length,
          }))
        : await run();
      if (!isReadBackOff(r)) throw new BmcStillOnError(lv.driver.target, budget, undefined);
      attempts.push({
        ...base,
        commandAt: iso(r.commandAt),
        finishedAt: iso(opts.now()),
        result: r.result,
        readBackState: r.readBackState,
        readBackAt: iso(r.readBackAt),
      });
      return { confirmed: true, level: i, attempts };
    } catch (err) {
      if (err instanceof RoundAbandoned) {
        const { look, message } = err;
        attempts.push({ ...base, finishedAt: iso(opts.now()), result: "abandoned", message, lastLook: look });
        break; // nothing was powered off; no later level may be either
      }
      const cancelled = opts.signal?.aborted === true;
      const fe = err instanceof FastfenceError ? err : undefined;
      const errorCode: ErrorCode = fe?.code ?? (ac.signal.aborted ? "FF_BMC_TIMEOUT" : "FF_INTERNAL");
      const message = fe?.message ?? (ac.signal.aborted ? "level budget exhausted" : "unexpected error");
      attempts.push({
        ...base,
        finishedAt: iso(opts.now()),
        result: attemptResultOf(errorCode, cancelled),
        errorCode,
        ...(message ? { message } : {}),
      });
      if (cancelled) break;
    } finally {
      clearTimeout(hard);
      opts.signal?.removeEventListener("abort", onAbort);
    }
  }
  return { confirmed: false, attempts };
}

/** Asks the last look; an abandon is thrown so that powerOffAndConfirm sends no off command. */
async function gate(look: (level: number) => Promise<OffGateVerdict>, level: number): Promise<void> {
  const v = await look(level);
  if (!v.go) throw new RoundAbandoned(v.look, v.message);
}

/** The driver with each call a span under the current one (only built while tracing). */
function tracedDriver(d: BmcDriver): BmcDriver {
  const attrs = (op: string) => ({ "fastfence.bmc.kind": d.kind, "fastfence.bmc.operation": op });
  return {
    kind: d.kind,
    target: d.target,
    status: (o) =>
      traceChild(
        "fastfence.bmc status",
        attrs("status"),
        () => d.status(o),
        (s) => ({ "fastfence.bmc.power_state": s.state }),
      ),
    off: (o) => traceChild("fastfence.bmc off", attrs("off"), () => d.off(o)),
    on: (o) => traceChild("fastfence.bmc on", attrs("on"), () => d.on(o)),
    ...(d.prepare
      ? { prepare: (o) => traceChild("fastfence.bmc prepare", attrs("prepare"), () => d.prepare!(o)) }
      : {}),
    ...(d.cycle
      ? { cycle: (o) => traceChild("fastfence.bmc cycle", attrs("cycle"), () => d.cycle!(o)) }
      : {}),
    ...(d.close ? { close: () => d.close!() } : {}),
  };
}
