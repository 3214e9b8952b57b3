// How the lab's drivers (the bench, chaos, the demo) name a failed step: the step, the
// error's message and its causes' ("creating the workloads: fetch failed: connect
// ECONNREFUSED 10.77.0.1:6443"), so a report line says what failed underneath. Pure text.

/** An error's message and up to three causes', joined by ": ". */
export function withCauses(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && depth < 4; depth++) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(": ");
}

/** A trial step that failed: `step` names it, the message carries the causes. */
export class StepError extends Error {
  override name = "StepError";
  readonly step: string;
  constructor(step: string, cause: unknown) {
    super(`${step}: ${withCauses(cause)}`, { cause });
    this.step = step;
  }
}

/** Runs `fn`, naming `step` in what it throws (an inner StepError passes unchanged). */
export async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof StepError ? err : new StepError(name, err);
  }
}
