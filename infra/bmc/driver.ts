// The BMC driver contract and the one power-off helper every fence goes through.
// A driver reads and changes one machine's power through its BMC (Redfish, IPMI, a fence
// agent). powerOffAndConfirm implements safety invariant S1: a node counts as off only
// when a status read *after* the off command says exactly "off". Its outcome is already
// in the NodeFence Attempt's vocabulary (core/incident.ts): success is "off-confirmed"
// with readBackState "Off", a failure's error code maps to the Attempt result here
// (attemptResultOf), so no later layer renames anything. It must never infer power-off
// from the off command's success, and nothing here may ever carry a credential into an
// error message, a log line or an attempt record.
import { FastfenceError, type ErrorCode } from "../../core/errors.ts";
import { systemClock } from "../../core/clock.ts";
import { DEFAULT_POLICY } from "../../core/policy.ts";
import type { Attempt, AttemptResult } from "../../core/incident.ts";

export type PowerState = "on" | "off" | "unknown";

export interface PowerStatus {
  state: PowerState;
  /** What the BMC said, verbatim (Redfish PowerState, IPMI "power on"/"power off", agent exit code). */
  raw: string;
}

export interface BmcCallOptions {
  /** Budget for this one call, in milliseconds. */
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface BmcDriver {
  /** Short, secret-free name for logs and attempt records, e.g. "redfish", "ipmi", "fence_ipmilan". */
  readonly kind: string;
  /** Secret-free target description, e.g. "https://10.0.0.5:443/redfish/v1/Systems/1". */
  readonly target: string;
  status(opts: BmcCallOptions): Promise<PowerStatus>;
  /** Issues the power-off command. Resolving says the BMC accepted it, NOT that the machine is off. */
  off(opts: BmcCallOptions): Promise<void>;
  on(opts: BmcCallOptions): Promise<void>;
  cycle?(opts: BmcCallOptions): Promise<void>;
  /**
   * Gets ready for a command without changing power: logs in, opens the session,
   * discovers the system, so the off that follows is one round trip. Optional.
   */
  prepare?(opts: BmcCallOptions): Promise<void>;
  /** Releases sessions and connections (best effort, never throws). */
  close?(): Promise<void>;
}

export type BmcErrorCode = Extract<
  ErrorCode,
  | "FF_BMC_AUTH_FAILED"
  | "FF_BMC_UNREACHABLE"
  | "FF_BMC_UNSUPPORTED"
  | "FF_BMC_TIMEOUT"
  | "FF_BMC_STILL_ON"
  | "FF_BMC_PROTOCOL"
>;

/** Base of every BMC error. `target` is secret-free (no userinfo in URLs). */
export class BmcError extends FastfenceError {
  constructor(code: BmcErrorCode, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(code, message, options);
  }
}

/**
 * The BMC rejected the credentials. Not retriable: the same credentials will fail again.
 * `secret` ("namespace/name", never a value) names the Secret they came from when the
 * caller knows it (the power executor, `fastfence bmc --node`): see `fromSecret`.
 */
export class BmcAuthError extends BmcError {
  readonly target: string;
  readonly secret: string | undefined;
  constructor(target: string, cause?: unknown, secret?: string) {
    super(
      "FF_BMC_AUTH_FAILED",
      secret
        ? `BMC ${target} rejected the credentials from Secret ${secret}`
        : `BMC ${target} rejected the credentials`,
      { cause, retriable: false },
    );
    this.target = target;
    this.secret = secret;
  }

  /** The same rejection, naming the Secret the credentials came from. */
  fromSecret(secret: string): BmcAuthError {
    return new BmcAuthError(this.target, this.cause, secret);
  }
}

/** No answer from the BMC (connection refused, reset, no UDP reply). Retriable. */
export class BmcUnreachableError extends BmcError {
  constructor(target: string, detail: string, cause?: unknown) {
    super("FF_BMC_UNREACHABLE", `BMC ${target} unreachable: ${detail}`, { cause, retriable: true });
  }
}

/** The BMC does not offer what was asked (no Reset action, ResetType not allowed, no power control). */
export class BmcUnsupportedError extends BmcError {
  constructor(target: string, detail: string) {
    super("FF_BMC_UNSUPPORTED", `BMC ${target}: ${detail}`, { retriable: false });
  }
}

/** A call did not finish within its budget. Retriable. */
export class BmcTimeoutError extends BmcError {
  constructor(target: string, what: string, timeoutMs: number, cause?: unknown) {
    super("FF_BMC_TIMEOUT", `BMC ${target}: ${what} timed out after ${timeoutMs} ms`, {
      cause,
      retriable: true,
    });
  }
}

/** The off command was sent but power-off was never read back. S1: this is a failure. */
export class BmcStillOnError extends BmcError {
  readonly lastState: PowerStatus | undefined;
  constructor(target: string, waitedMs: number, lastState: PowerStatus | undefined) {
    super(
      "FF_BMC_STILL_ON",
      `BMC ${target}: power-off not confirmed after ${waitedMs} ms (last read: ${lastState?.raw ?? "none"})`,
      { retriable: true },
    );
    this.lastState = lastState;
  }
}

/** The BMC answered something we cannot interpret (bad JSON, malformed packet, HTTP 5xx). */
export class BmcProtocolError extends BmcError {
  constructor(target: string, detail: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super("FF_BMC_PROTOCOL", `BMC ${target}: ${detail}`, {
      retriable: options.retriable ?? true,
      cause: options.cause,
    });
  }
}

/**
 * An AbortSignal that fires on the caller's signal or after timeoutMs, whichever comes
 * first; `timedOut()` tells the two apart. Call `done()` to clear the timer.
 */
export function deadline(opts: BmcCallOptions): {
  signal: AbortSignal;
  timedOut: () => boolean;
  done: () => void;
} {
  const ac = new AbortController();
  let fired = false;
  const t = setTimeout(
    () => {
      fired = true;
      ac.abort(new Error("timeout"));
    },
    Math.max(0, opts.timeoutMs),
  );
  const onAbort = () => ac.abort(opts.signal?.reason);
  if (opts.signal?.aborted) ac.abort(opts.signal.reason);
  else opts.signal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: ac.signal,
    timedOut: () => fired,
    done: () => {
      clearTimeout(t);
      opts.signal?.removeEventListener("abort", onAbort);
    },
  };
}

export interface ConfirmOptions {
  /** Total budget (the level's): getting the driver ready, the off command and every read-back. */
  timeoutMs: number;
  /** Pause between status reads. */
  pollMs: number;
  signal?: AbortSignal;
  /** Monotonic-enough clock in ms (injected for tests). */
  now: () => number;
  /** Sleep (injected for tests); defaults to setTimeout. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * Cap of one BMC call (one status read or the off command), within what is left of
   * `timeoutMs`: the policy's timeouts.bmcCallTimeoutMs. Default: the policy default (5000).
   */
  callTimeoutMs?: number;
  /** Re-send the off command when a read-back still says on after this many reads (0 = never). */
  resendOffEvery?: number;
  /**
   * Called once the driver is ready, just before the (first) off command: fence's last look
   * (infra/fence/last-look.ts). What it throws ends the call before any off command.
   */
  beforeOff?: () => Promise<void>;
}

export interface Readback {
  at: number;
  state: PowerState;
  raw: string;
  error?: string;
}

/**
 * A power-off read back as exactly off (S1), with the NodeFence Attempt's field names and
 * values (core/incident.ts); times are ms of the caller's clock (`ConfirmOptions.now`).
 * powerOffAndConfirm returns nothing else: every other ending is a thrown error.
 */
export interface OffConfirmed {
  result: Extract<AttemptResult, "off-confirmed">;
  readBackState: Extract<NonNullable<Attempt["readBackState"]>, "Off">;
  /** When the off command was issued. */
  commandAt: number;
  /** When the status read that said exactly "off" returned (after commandAt). */
  readBackAt: number;
  offCommands: number;
  readbacks: Readback[];
}

/** A power-off's ending other than "off-confirmed". */
export type FailedAttemptResult = Exclude<AttemptResult, "off-confirmed">;

const FAILED_RESULT_BY_CODE: Partial<Record<ErrorCode, FailedAttemptResult>> = {
  FF_BMC_STILL_ON: "still-on",
  FF_BMC_UNREACHABLE: "unreachable",
  FF_BMC_AUTH_FAILED: "auth-failed",
  FF_BMC_TIMEOUT: "timeout",
};

/**
 * The Attempt result of a power-off that ended with this error code (never
 * "off-confirmed": only an OffConfirmed is that). A cancelled one without a more
 * specific result ran out of time ("timeout"); anything else is "error".
 */
export function attemptResultOf(code: ErrorCode, cancelled: boolean): FailedAttemptResult {
  return FAILED_RESULT_BY_CODE[code] ?? (cancelled ? "timeout" : "error");
}

const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> => systemClock.sleep(ms, signal);

function errCode(err: unknown): string {
  return err instanceof FastfenceError ? err.code : "FF_INTERNAL";
}

/**
 * Issues off, then reads status until it reads exactly "off" (S1). Throws the off
 * command's error if it fails (auth, unsupported...), BmcStillOnError when the budget
 * ends without an "off" read-back, and the caller's abort reason when aborted.
 * Transient status-read errors are recorded and polling continues.
 */
export async function powerOffAndConfirm(driver: BmcDriver, opts: ConfirmOptions): Promise<OffConfirmed> {
  const sleep = opts.sleep ?? defaultSleep;
  const start = opts.now();
  const end = start + opts.timeoutMs;
  const remaining = () => end - opts.now();
  const callTimeoutMs = opts.callTimeoutMs ?? DEFAULT_POLICY.timeouts.bmcCallTimeoutMs;
  const callBudget = () => Math.max(1, Math.min(remaining(), callTimeoutMs));
  const readbacks: Readback[] = [];
  let last: PowerStatus | undefined;
  let offCommands = 0;

  // Discovery and login (a cold Redfish session is several requests) get the level's whole
  // budget, not one call's: a no-op when the driver is ready (a head start did it).
  if (driver.prepare) {
    try {
      await driver.prepare({ timeoutMs: Math.max(1, remaining()), signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      // refused credentials, or a BMC that answers nothing (it died with its node, or is cut
      // off): the off command would meet the same, after as long again
      if (
        err instanceof FastfenceError &&
        (err.code === "FF_BMC_AUTH_FAILED" || err.code === "FF_BMC_UNREACHABLE")
      )
        throw err;
      // anything else: the off command below meets the same problem and reports it
    }
  }

  const issueOff = async () => {
    offCommands++;
    await driver.off({ timeoutMs: callBudget(), signal: opts.signal });
  };

  if (opts.beforeOff) {
    await opts.beforeOff();
    if (opts.signal?.aborted) throw opts.signal.reason;
  }
  const commandAt = opts.now();
  await issueOff();
  let onReads = 0;
  for (;;) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (remaining() <= 0) break;
    try {
      const st = await driver.status({ timeoutMs: callBudget(), signal: opts.signal });
      last = st;
      const at = opts.now();
      readbacks.push({ at, state: st.state, raw: st.raw });
      // S1: exactly "off", read after the command, is the only way to return.
      if (st.state === "off")
        return {
          result: "off-confirmed",
          readBackState: "Off",
          commandAt,
          readBackAt: at,
          offCommands,
          readbacks,
        };
      onReads++;
      if (opts.resendOffEvery && onReads % opts.resendOffEvery === 0 && remaining() > 0) {
        try {
          await issueOff();
        } catch {
          // the read-back loop decides; a failed re-send is not fatal by itself
        }
      }
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      readbacks.push({ at: opts.now(), state: "unknown", raw: "", error: errCode(err) });
      // Auth errors will not heal within one fence: stop early with the typed error.
      if (err instanceof FastfenceError && err.code === "FF_BMC_AUTH_FAILED") throw err;
    }
    const wait = Math.min(opts.pollMs, remaining());
    if (wait <= 0) break;
    await sleep(wait, opts.signal);
  }
  throw new BmcStillOnError(driver.target, opts.now() - start, last);
}
