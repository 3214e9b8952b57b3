// Hedged attempts of one idempotent request (a read) across API servers: the first server
// in the given order gets it; when it has not answered within `hedgeAfterMs`, or failed
// without an answer (no connection, its deadline), the next one gets it too, and so on;
// the first answer wins, an HTTP error included (the server answered). Behind a silent
// etcd member an API server leaves some requests unanswered and answers the rest, so a
// second try soon, not after a whole deadline, is what gets a read through. It must never
// be used for a write (a slow first attempt may still land), and it never retries an answer.

export type HedgedResult<T> =
  | { kind: "value"; value: T; server: string; failed: string[] }
  | { kind: "answer"; error: unknown; server: string; failed: string[] }
  | { kind: "none"; error: unknown; failed: string[] };

export async function hedgedAttempts<T>(
  servers: readonly string[],
  attempt: (server: string) => Promise<T>,
  opts: { hedgeAfterMs: number; isAnswer: (err: unknown) => boolean },
): Promise<HedgedResult<T>> {
  if (servers.length === 0) return { kind: "none", error: new Error("no API server to try"), failed: [] };
  return new Promise((resolve) => {
    const failed: string[] = [];
    let next = 0;
    let pending = 0;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let lastError: unknown;
    const finish = (r: HedgedResult<T>) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      resolve(r);
    };
    const launch = () => {
      if (done || next >= servers.length) return;
      const server = servers[next++]!;
      pending++;
      if (timer) clearTimeout(timer);
      timer = setTimeout(launch, opts.hedgeAfterMs);
      attempt(server).then(
        (value) => finish({ kind: "value", value, server, failed: [...failed] }),
        (err: unknown) => {
          pending--;
          if (done) return;
          if (opts.isAnswer(err)) return finish({ kind: "answer", error: err, server, failed: [...failed] });
          failed.push(server);
          lastError = err;
          if (next < servers.length) launch();
          else if (pending === 0) finish({ kind: "none", error: lastError, failed: [...failed] });
        },
      );
    };
    launch();
  });
}
