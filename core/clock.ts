// Time as an injected dependency. Pure code receives `now` (epoch milliseconds) as an
// argument; adapters get a Clock so tests can use a manual one. Never reads the wall
// clock from pure handlers.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const t = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

/**
 * Whether `work` settles (fulfilled or rejected) within `ms` on `clock`. Never rejects: the
 * caller logs the work's own error, and after a false answer the work goes on in the
 * background. The wait's timer ends as soon as the work settles.
 */
export async function settlesWithin(clock: Clock, ms: number, work: Promise<unknown>): Promise<boolean> {
  const timer = new AbortController();
  const late = clock.sleep(ms, timer.signal).then(
    () => false,
    () => false,
  );
  const settled = work.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, late]);
  } finally {
    timer.abort();
  }
}

/** A clock for tests: time moves only when `advance` is called. */
export class ManualClock implements Clock {
  private t: number;
  private waiters: { at: number; resolve: () => void }[] = [];
  constructor(start = 0) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.waiters.push({ at: this.t + ms, resolve }));
  }
  advance(ms: number): void {
    this.t += ms;
    const due = this.waiters.filter((w) => w.at <= this.t);
    this.waiters = this.waiters.filter((w) => w.at > this.t);
    for (const w of due) w.resolve();
  }
}
