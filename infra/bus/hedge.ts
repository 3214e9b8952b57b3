// Hedged sends, the fencing path's answer to a partition leader on a dead or frozen
// broker, shared by both Kafka clients' publishers: a record goes to one partition
// (round-robin, skipping partitions that recently missed the deadline); if it is not
// acknowledged within hedgeAfterMs the same record also goes to the next partition (up to
// maxSends), and the slow partition is avoided as a first choice for a while. The first
// acknowledgement wins; the call fails only once every send failed. It never sends by
// itself (the caller's `send` does) and never logs record values.
import { FastfenceError } from "../../core/errors.ts";

/**
 * How long a partition that missed the hedge deadline is avoided as a first choice, ms.
 * Covers a dead leader until the controller moves it (broker.session.timeout.ms, plus a
 * controller election if the controller died too); a healthy partition is tried again
 * as the third hedge choice meanwhile, and cleared as soon as it answers in time.
 */
const SLOW_PARTITION_MS = 5000;

export class PartitionHedge {
  private nextPartition = 0;
  /** Called when a send fails or misses the hedge deadline (broker-trouble.ts). */
  private readonly onTrouble: () => void;
  constructor(onTrouble: () => void = () => undefined) {
    this.onTrouble = onTrouble;
  }
  /** "topic/partition" → until when publishes avoid starting there (ms epoch). */
  private readonly slowUntil = new Map<string, number>();

  /**
   * The partition a publish starts on: round-robin, skipping partitions that recently
   * missed the hedge deadline (their leader is probably on a dead node, until the
   * controller moves it) unless all of them did.
   */
  firstPartition(topic: string, n: number): number {
    const now = Date.now();
    const start = this.nextPartition++;
    for (let i = 0; i < n; i++) {
      const p = (start + i) % n;
      const until = this.slowUntil.get(`${topic}/${p}`);
      if (until === undefined || until <= now) return p;
    }
    return start % n;
  }

  /**
   * Learns from a send made outside the hedge (an ISR keepalive to `partition`, one per
   * partition, infra/runtime/keepalive.ts): not acknowledged within `hedgeAfterMs`, or
   * failed, the partition is avoided as a first choice for a while, as if a hedged publish
   * had missed its deadline there; acknowledged in time, it is cleared. So after a broker
   * dies, the incident's next event starts on a live leader's partition instead of paying
   * the hedge deadline first. Never reports trouble itself (the keepalive runs because of
   * trouble; reporting would keep it going). Resolves with whether `sent` was acknowledged.
   */
  async observe(
    topic: string,
    partition: number,
    hedgeAfterMs: number,
    sent: Promise<unknown>,
  ): Promise<boolean> {
    const key = `${topic}/${partition}`;
    const started = Date.now();
    const timer = setTimeout(() => this.slowUntil.set(key, Date.now() + SLOW_PARTITION_MS), hedgeAfterMs);
    try {
      await sent;
      if (Date.now() - started < hedgeAfterMs) this.slowUntil.delete(key);
      return true;
    } catch {
      this.slowUntil.set(key, Date.now() + SLOW_PARTITION_MS);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Sends once to each of `n` partitions side by side (ISR keepalives), with `send(partition)`;
   * with hedging on (`hedgeAfterMs` > 0) each answer, or its absence, is observed as above.
   * Resolves with how many partitions acknowledged; a failed send is counted out, never thrown.
   */
  async sendToEvery(
    topic: string,
    n: number,
    hedgeAfterMs: number,
    send: (partition: number) => Promise<unknown>,
  ): Promise<number> {
    const acked = await Promise.all(
      Array.from({ length: n }, (_, partition) => {
        const sent = send(partition);
        return hedgeAfterMs > 0
          ? this.observe(topic, partition, hedgeAfterMs, sent)
          : sent.then(
              () => true,
              () => false,
            );
      }),
    );
    return acked.filter(Boolean).length;
  }

  /**
   * Sends with hedging over `n` partitions: `send(partition)` (undefined when n is 1: the
   * client picks), at most `maxSends` times, a new one every `hedgeAfterMs` while none
   * was acknowledged or at once after a failure. Rejects with a retriable
   * FF_BUS_UNAVAILABLE once every send failed.
   */
  async send(
    topic: string,
    n: number,
    maxSends: number,
    hedgeAfterMs: number,
    send: (partition: number | undefined) => Promise<unknown>,
  ): Promise<void> {
    const first = this.firstPartition(topic, n);
    await new Promise<void>((resolve, reject) => {
      let sent = 0;
      let failed = 0;
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        clearInterval(timer);
        if (err === undefined) resolve();
        else
          reject(
            new FastfenceError("FF_BUS_UNAVAILABLE", `publishing to ${topic} failed`, {
              cause: err,
              retriable: true,
            }),
          );
      };
      const launch = () => {
        const partition = n > 1 ? (first + sent) % n : undefined;
        sent++;
        const started = Date.now();
        send(partition).then(
          () => {
            if (partition !== undefined && Date.now() - started < hedgeAfterMs)
              this.slowUntil.delete(`${topic}/${partition}`);
            finish();
          },
          (err: unknown) => {
            failed++;
            this.onTrouble();
            if (sent < maxSends) launch();
            else if (failed >= sent) finish(err);
          },
        );
      };
      launch();
      if (maxSends > 1)
        timer = setInterval(() => {
          if (done) return;
          // The partition tried last has not answered in time: start elsewhere for a while.
          this.onTrouble();
          this.slowUntil.set(`${topic}/${(first + sent - 1) % n}`, Date.now() + SLOW_PARTITION_MS);
          if (sent < maxSends) launch();
        }, hedgeAfterMs);
    });
  }
}

/**
 * Partition counts per topic for hedging, cached; a topic whose count cannot be read counts
 * as 1 (no hedging) and is read again on the next publish. `read` asks the cluster.
 */
export class PartitionCounts {
  private readonly counts = new Map<string, Promise<number>>();
  private readonly read: (topic: string) => Promise<number>;
  constructor(read: (topic: string) => Promise<number>) {
    this.read = read;
  }

  /** Reads the counts of `topics` now (those not known yet); rejects if any read failed. */
  async prepare(topics: readonly string[]): Promise<void> {
    await Promise.all(
      topics.map(async (t) => {
        await this.of(t);
        if (!this.counts.has(t)) throw new Error(`the partition count of ${t} could not be read`);
      }),
    );
  }

  of(topic: string): Promise<number> {
    let n = this.counts.get(topic);
    if (!n) {
      n = this.read(topic)
        .then((c) => Math.max(1, c))
        .catch(() => {
          this.counts.delete(topic);
          return 1;
        });
      this.counts.set(topic, n);
    }
    return n;
  }
}
