// Polling until a condition holds, for the tests, the lab and the benches: waitUntil
// calls `fn` every `everyMs` until it returns something other than undefined or false,
// and throws, naming what it waited for and the last error, when `timeoutMs` is over.
// An error `fn` throws is kept as the "last error" and polling goes on, except a
// WaitAbandoned, which ends the wait at once (the condition can no longer come true).
// It must never swallow a timeout.
import { sleep } from "./base.ts";

/** Thrown by a waitUntil condition that can no longer come true (e.g. the process it waits on died). */
export class WaitAbandoned extends Error {
  override readonly name = "WaitAbandoned";
}

export async function waitUntil<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  everyMs = 50,
  /** Put before the timeout message, e.g. "lab: ". */
  context = "",
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      if (err instanceof WaitAbandoned)
        throw new Error(`${context}gave up waiting for ${what}: ${err.message}`, { cause: err });
      lastErr = err;
    }
    if (Date.now() > end)
      throw new Error(
        `${context}timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${String(lastErr)})` : ""}`,
      );
    await sleep(everyMs);
  }
}
