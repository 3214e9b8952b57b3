// Hedged sends, the fencing path's answer to a partition leader on a dead or frozen
// broker, shared by both Kafka clients' publishers: a record goes to one partition
// (round-robin, skipping partitions that recently missed the deadline); if it is not
// acknowledged within hedgeAfterMs the same record also goes to another partition (up to
// maxSends), chosen away from the brokers of the partitions that missed (with two
// replicas on three brokers, some partition has none on the failed broker and needs no
// ISR change, leader move or KRaft controller to take a write), and the slow partition is
// avoided as a first choice for a while. The first acknowledgement wins; the call fails
// only once every send failed. It never sends by itself (the caller's `send` does) and
// never logs record values.
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
   * controller moves it) unless all of them did, and, when `replicas` is known, preferring
   * the partitions whose replicas are on none of the slow partitions' brokers (pick).
   */
  firstPartition(topic: string, n: number, replicas?: TopicLayout["replicas"]): number {
    return this.pick(topic, n, replicas, this.nextPartition++ % n, []);
  }

  /** A hedged send's next copy: `first` for the first one, then pick()'s choice. */
  private next(topic: string, layout: TopicLayout, first: number, tried: readonly number[]): number {
    return tried.length === 0 ? first : this.pick(topic, layout.partitions, layout.replicas, first, tried);
  }

  /**
   * The partition to send to next, among those not `tried` yet: one that is not slow if
   * there is one; among those, the one whose replicas sit on the brokers least involved in
   * the partitions that were slow or already tried (a broker's weight is how many of those
   * partitions it holds a replica of); ties go to the first in round-robin order from
   * `start`. With three replicas on three brokers every partition weighs the same and
   * this is plain round-robin. With two replicas on three brokers, a partition whose
   * replicas avoid the dead or frozen broker needs neither an ISR change nor a leader move
   * (so no KRaft controller), and after two misses the third send goes to the one pair of
   * brokers both misses left out.
   */
  private pick(
    topic: string,
    n: number,
    replicas: TopicLayout["replicas"],
    start: number,
    tried: readonly number[],
  ): number {
    const now = Date.now();
    const isSlow = (p: number) => (this.slowUntil.get(`${topic}/${p}`) ?? 0) > now;
    const weight = new Map<number, number>();
    if (replicas)
      for (let p = 0; p < n; p++)
        if (tried.includes(p) || isSlow(p))
          for (const b of replicas[p] ?? []) weight.set(b, (weight.get(b) ?? 0) + 1);
    let best: { p: number; slow: boolean; weight: number } | undefined;
    for (let i = 0; i < n; i++) {
      const p = (start + i) % n;
      if (tried.includes(p)) continue;
      const c = { p, slow: isSlow(p), weight: 0 };
      for (const b of replicas?.[p] ?? []) c.weight += weight.get(b) ?? 0;
      if (!best || (best.slow && !c.slow) || (best.slow === c.slow && c.weight < best.weight)) best = c;
    }
    return best?.p ?? (start + tried.length) % n;
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
   * Sends with hedging over the topic's partitions (`layout`): `send(partition, copy)`
   * (partition undefined when there is one: the client picks; copy 0 for the first send, 1
   * and 2 for the hedges, so the caller can send hedges through another client), at most
   * `maxSends` times, a new one every `hedgeAfterMs` while none was acknowledged or at once
   * after a failure, each to the partition pick() names. Rejects with a retriable
   * FF_BUS_UNAVAILABLE once every send failed.
   */
  async send(
    topic: string,
    layout: TopicLayout,
    maxSends: number,
    hedgeAfterMs: number,
    send: (partition: number | undefined, copy: number) => Promise<unknown>,
  ): Promise<void> {
    const n = layout.partitions;
    const first = this.firstPartition(topic, n, layout.replicas);
    await new Promise<void>((resolve, reject) => {
      const tried: number[] = [];
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
        const partition = n === 1 ? undefined : this.next(topic, layout, first, tried);
        const copy = tried.length;
        tried.push(partition ?? 0);
        const started = Date.now();
        send(partition, copy).then(
          () => {
            if (partition !== undefined && Date.now() - started < hedgeAfterMs)
              this.slowUntil.delete(`${topic}/${partition}`);
            finish();
          },
          (err: unknown) => {
            failed++;
            this.onTrouble();
            if (tried.length < maxSends) launch();
            else if (failed >= tried.length) finish(err);
          },
        );
      };
      launch();
      if (maxSends > 1)
        timer = setInterval(() => {
          if (done) return;
          // The partition tried last has not answered in time: start elsewhere for a while.
          this.onTrouble();
          this.slowUntil.set(`${topic}/${tried[tried.length - 1] ?? 0}`, Date.now() + SLOW_PARTITION_MS);
          if (tried.length < maxSends) launch();
        }, hedgeAfterMs);
    });
  }
}

/** Where a topic's partitions are: how many, and the brokers holding each one's replicas. */
export interface TopicLayout {
  partitions: number;
  /** Broker ids of each partition's replicas, by partition; undefined when not known. */
  replicas?: readonly (readonly number[])[];
}

/**
 * Topic layouts for hedging, read once per topic (a reassignment of replicas is rare and
 * only makes the hedge's choices less good, never wrong); a topic whose layout cannot be
 * read counts as one partition (no hedging) and is read again on the next publish. `read`
 * asks the cluster.
 */
export class TopicLayouts {
  private readonly layouts = new Map<string, Promise<TopicLayout>>();
  private readonly read: (topic: string) => Promise<TopicLayout>;
  constructor(read: (topic: string) => Promise<TopicLayout>) {
    this.read = read;
  }

  /** Reads the layouts of `topics` now (those not known yet); rejects if any read failed. */
  async prepare(topics: readonly string[]): Promise<void> {
    await Promise.all(
      topics.map(async (t) => {
        await this.of(t);
        if (!this.layouts.has(t)) throw new Error(`the partitions of ${t} could not be read`);
      }),
    );
  }

  of(topic: string): Promise<TopicLayout> {
    let layout = this.layouts.get(topic);
    if (!layout) {
      layout = this.read(topic)
        .then((l) => (l.partitions >= 1 ? l : { partitions: 1 }))
        .catch(() => {
          this.layouts.delete(topic);
          return { partitions: 1 };
        });
      this.layouts.set(topic, layout);
    }
    return layout;
  }
}
