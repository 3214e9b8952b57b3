// Hedged attempts of one request across API servers: the first server in the given order
// gets it; when it has not answered within `hedgeAfterMs`, or failed without an answer (no
// connection, its deadline), the next one gets it too, and so on; the first answer wins, an
// HTTP error included (the server answered). Behind a silent etcd member an API server
// leaves some requests unanswered and answers the rest, so a second try soon, not after a
// whole deadline, is what gets a request through. Only for requests a second copy cannot
// apply twice: reads, and guarded writes (Kube.write), whose conflict answers are `held`:
// such an answer may be a copy losing to another copy still on its way, so it stops further
// copies and wins only once no copy is left in flight. It never retries an answer.

export type HedgedResult<T> =
  | { kind: "value"; value: T; server: string; failed: string[] }
  | { kind: "answer"; error: unknown; server: string; failed: string[] }
  | { kind: "none"; error: unknown; failed: string[] };

export interface HedgeOptions {
  hedgeAfterMs: number;
  /** An HTTP answer (ends the attempts), as opposed to no answer (the next server is tried). */
  isAnswer: (err: unknown) => boolean;
  /** An answer that waits for the copies still in flight, any of which may still succeed. */
  held?: (err: unknown) => boolean;
  /**
   * Ends the attempts this long after the first, ms, those still in flight counted as failed
   * (their results are ignored): the held answer if there is one, else none. Default: none.
   */
  budgetMs?: number;
}

export async function hedgedAttempts<T>(
  servers: readonly string[],
  attempt: (server: string) => Promise<T>,
  opts: HedgeOptions,
): Promise<HedgedResult<T>> {
  if (servers.length === 0) return { kind: "none", error: new Error("no API server to try"), failed: [] };
  return new Promise((resolve) => {
    const failed: string[] = [];
    let next = 0;
    let pending = 0;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let lastError: unknown;
    let heldAnswer: { error: unknown; server: string } | undefined;
    const inFlight: string[] = [];
    let budget: NodeJS.Timeout | undefined;
    const finish = (r: HedgedResult<T>) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (budget) clearTimeout(budget);
      resolve(r);
    };
    if (opts.budgetMs !== undefined)
      budget = setTimeout(() => {
        for (const s of inFlight) if (!failed.includes(s)) failed.push(s);
        if (heldAnswer) finish({ kind: "answer", ...heldAnswer, failed: [...failed] });
        else
          finish({
            kind: "none",
            error: lastError ?? new Error(`no answer within ${opts.budgetMs} ms`),
            failed: [...failed],
          });
      }, opts.budgetMs);
    const settleIfIdle = () => {
      if (pending > 0) return;
      if (heldAnswer) finish({ kind: "answer", ...heldAnswer, failed: [...failed] });
      else finish({ kind: "none", error: lastError, failed: [...failed] });
    };
    const launch = () => {
      if (done || heldAnswer || next >= servers.length) return;
      const server = servers[next++]!;
      pending++;
      inFlight.push(server);
      if (timer) clearTimeout(timer);
      timer = setTimeout(launch, opts.hedgeAfterMs);
      attempt(server).then(
        (value) => finish({ kind: "value", value, server, failed: [...failed] }),
        (err: unknown) => {
          pending--;
          inFlight.splice(inFlight.indexOf(server), 1);
          if (done) return;
          if (opts.isAnswer(err) && !opts.held?.(err))
            return finish({ kind: "answer", error: err, server, failed: [...failed] });
          if (opts.isAnswer(err)) {
            heldAnswer ??= { error: err, server };
            if (timer) clearTimeout(timer);
            return settleIfIdle();
          }
          failed.push(server);
          lastError = err;
          if (!heldAnswer && next < servers.length) launch();
          else settleIfIdle();
        },
      );
    };
    launch();
  });
}
