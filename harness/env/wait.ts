// Polling until a condition holds, for the tests, the lab and the benches: waitUntil
// calls `fn` every `everyMs` until it returns something other than undefined or false,
// and throws, naming what it waited for and the last error, when `timeoutMs` is over.
// It must never swallow a timeout.
import { sleep } from "./base.ts";

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
      lastErr = err;
    }
    if (Date.now() > end)
      throw new Error(
        `${context}timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${String(lastErr)})` : ""}`,
      );
    await sleep(everyMs);
  }
}
