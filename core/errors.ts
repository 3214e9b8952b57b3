// Typed errors for the whole project. Every error fastfence raises on purpose is a
// FastfenceError with a stable `code`, a `retriable` flag (which drives the dispatcher's
// retries, infra/runtime/dispatch.ts) and an optional `cause`. Callers branch on `code` or
// on the class, never on `message` text. Messages must never contain secrets.
import type { RejectCode } from "./reasons.ts";

export type ErrorCode =
  | "FF_INVALID_EVENT"
  | "FF_INVALID_CONFIG"
  | "FF_KUBE_CONFLICT"
  | "FF_KUBE_UNAVAILABLE"
  | "FF_KUBE_NOT_FOUND"
  | "FF_BUS_UNAVAILABLE"
  | "FF_BMC_AUTH_FAILED"
  | "FF_BMC_UNREACHABLE"
  | "FF_BMC_UNSUPPORTED"
  | "FF_BMC_TIMEOUT"
  | "FF_BMC_STILL_ON"
  | "FF_BMC_PROTOCOL"
  | "FF_NODE_RESPONDING"
  /** The watchdog level: the node's agent reported no armed watchdog (for the incident's boot). */
  | "FF_WATCHDOG_NOT_ARMED"
  /** The watchdog level: the node was not watched quiet long enough before the round's end. */
  | "FF_WATCHDOG_NOT_EXPIRED"
  | "FF_CANCELLED"
  | "FF_INTERNAL";

export class FastfenceError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
  }

  /** A JSON-safe summary for logs and incident status (no stack, no secrets). */
  toJSON(): { code: ErrorCode; message: string; retriable: boolean; cause?: string } {
    const cause = this.cause instanceof Error ? this.cause.message : undefined;
    return { code: this.code, message: this.message, retriable: this.retriable, ...(cause ? { cause } : {}) };
  }
}

/**
 * Input that fails validation: a CloudEvent, a config file, a CLI argument. It describes
 * the input, not a bug, so it carries no stack trace: capturing one costs about 10 µs, and
 * a flood of bad records makes one per record.
 */
export class InvalidInputError extends FastfenceError {
  readonly issues: readonly string[];
  constructor(
    code: "FF_INVALID_EVENT" | "FF_INVALID_CONFIG",
    message: string,
    issues: readonly string[] = [],
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(code, issues.length ? `${message}: ${issues.join("; ")}` : message);
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.issues = issues;
  }
}

export class CancelledError extends FastfenceError {
  constructor(what: string, cause?: unknown) {
    super("FF_CANCELLED", `${what} was cancelled`, { cause });
  }
}

/**
 * A valid event a stage rejected (a "rejected" outcome): dead-lettered, never retried.
 * `reasonCode` is the stage's stable code (core/reasons.ts); the message is its human reason.
 */
export class RejectedEventError extends FastfenceError {
  readonly reasonCode: RejectCode;
  constructor(reasonCode: RejectCode, reason: string) {
    super("FF_INVALID_EVENT", reason);
    this.reasonCode = reasonCode;
  }

  override toJSON(): ReturnType<FastfenceError["toJSON"]> & { reasonCode: RejectCode } {
    return { ...super.toJSON(), reasonCode: this.reasonCode };
  }
}

/** Wraps anything thrown into a FastfenceError, keeping typed ones as they are. */
export function asFastfenceError(err: unknown, code: ErrorCode = "FF_INTERNAL"): FastfenceError {
  if (err instanceof FastfenceError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new FastfenceError(code, message, { cause: err });
}
