// Fixes to kafkajs 2.2.4's consumer for the moment a broker dies, applied once to its
// ConsumerGroup, OffsetManager and Runner classes. kafkajs is pinned and no longer
// released, so these live here, small and tested (test/integration/bus-kafka.test.ts kills
// the group coordinator; kafkajs-stop-frozen.test.ts stops a consumer while a broker is
// frozen), instead of in a fork. They only change what happens after a connection error,
// while the group coordinator is unavailable or once the consumer is stopping; they never
// touch records or the group protocol, and an offset commit that does not happen only
// means a record is delivered again (every handler is idempotent).
//
// 1. Dead group coordinator. kafkajs finds the coordinator when it joins and keeps that
//    broker: when it dies, every heartbeat fails with a connection error, which kafkajs
//    treats as a generic failure (pause all fetches for a backoff, re-deliver uncommitted
//    records, repeat) and never looks the coordinator up again until the consumer crashes
//    and restarts. Instead a failed heartbeat is retried after the heartbeat interval
//    while the coordinator is looked up again in the background (as the Java client
//    does); fetching goes on meanwhile.
// 2. Dead partition leader. kafkajs fetches from each broker separately, but a connection
//    error from one of them stops them all for a backoff, again and again until the
//    partition-leader map (refreshed only when it expires) no longer names the dead
//    broker. We treat such an error like kafkajs already treats a closed connection: that
//    broker's fetch returns nothing (after a short pause, so it does not spin), the others
//    go on, and the map is expired so the next fetch reads the new leaders as soon as the
//    controller has moved them.
// 3. Commits while the coordinator moves. kafkajs commits after every batch and waits for
//    it; while the group's coordinator is being re-elected that wait (its lookup retries)
//    takes seconds and no record is handled meanwhile. A commit is now waited for at most
//    COMMIT_WAIT_MS (its failure within that time still surfaces as before); a slower one
//    finishes in the background, and no second one starts until it has. And the offset
//    manager, which keeps its own copy of the coordinator from join time and otherwise
//    fails every commit once that broker has left the cluster's metadata (until the
//    consumer crashes), looks the coordinator up again.
// 4. A stop while the fetchers are being rebuilt. When the set of brokers changes (a dead or
//    frozen broker leaves the metadata), kafkajs' fetch manager stops its fetchers, one per
//    broker, and then builds new ones, without asking whether the consumer is still running.
//    If the consumer was stopped meanwhile, the new fetchers ask a runner that no longer runs
//    for records, which answers "none" at once, with no I/O, and they ask again: a loop of
//    microtasks only, so no timer of the process fires again, no request can time out and
//    the stop never ends (chaos seed 99: an agent at full CPU whose other replicas starved).
//    Now a runner that no longer runs stops the fetchers that ask it, and yields to the
//    event loop before it answers.
// 5. A request that times out closes its connection, as the Java client does. kafkajs
//    keeps the connection, so a broker that is frozen or cut off by a partition (its
//    socket stays open, nothing answers) still counts as connected, and each metadata
//    refresh picks a connected broker at random: about one in three went to the silent one,
//    timed out, was retried, and every publish of the client waited behind it (chaos seed
//    161: a detect replica's publishes failed for 17 s in a row, long after the controller
//    had moved every leadership off the partitioned broker). Now a connection that has
//    been silent since the timed-out request was sent is closed at once and the requests
//    still on it fail as on a closed connection, so the next refresh goes to a broker that
//    answers; the next request for that broker connects again. A timed-out Produce never
//    closes its connection: a live leader holds an acks=all produce until its ISR shrinks
//    (as long as the request timeout when a broker has just died), and closing the
//    connection to a live broker then cost the crash bench ~0.5-1.5 s per controller-victim
//    trial (a reconnect, a SASL handshake and every other request on it retried).
// 6. Heartbeats to a frozen coordinator. kafkajs waits for a group heartbeat after every
//    batch (and every empty fetch); to a coordinator that is frozen or silent, each takes a
//    request timeout (fix 5 then closes the connection, fix 1 looks the coordinator up
//    again, and a later try waits a connection timeout), and no record is handled
//    meanwhile: with the coordinator silent to the consumer, records waited up to 1.2 s,
//    about once per heartbeat interval (kafkajs-request-timeout.test.ts). Now record
//    handling waits at most HEARTBEAT_WAIT_MS for a heartbeat; a slower one finishes in the
//    background, no second one starts until it has, and its failure (a rebalance, say) is
//    thrown to the next call.
// 7. Seeds and metadata refreshes away from a broker that just went silent
//    (kafkajs-suspects.ts): a request or connection timeout here marks the broker suspect
//    for every client of the process, data from it clears the mark.
import { createRequire } from "node:module";
import { kafkaJsTrouble } from "./broker-trouble.ts";
import { clearSuspect, markSuspect, patchBrokerPool, type BrokerPoolProto } from "./kafkajs-suspects.ts";

const require = createRequire(import.meta.url);

interface BrokerLike {
  nodeId: number;
}

interface ConsumerGroupLike {
  groupId?: string;
  coordinator?: BrokerLike;
  lastRequest?: number;
  cluster?: {
    brokerPool?: { metadataExpireAt: number | null };
    findGroupCoordinator?(q: { groupId: string }): Promise<BrokerLike>;
  };
  __ffLookup?: Promise<void>;
  __ffCommit?: Promise<unknown>;
  __ffBeat?: Promise<void>;
  __ffBeatError?: unknown;
}

interface ConsumerGroupProto {
  heartbeat(this: ConsumerGroupLike, opts: unknown): Promise<unknown>;
  recoverFromFetch(this: ConsumerGroupLike, e: unknown): Promise<unknown>;
  commitOffsets(this: ConsumerGroupLike, offsets?: unknown): Promise<unknown>;
  commitOffsetsIfNecessary(this: ConsumerGroupLike): Promise<unknown>;
  __fastfenceFailover?: true;
}

interface RunnerLike {
  running: boolean;
  fetchManager?: { stop(): Promise<void> };
}

interface RunnerProto {
  fetch(this: RunnerLike, nodeId: number): Promise<unknown[]>;
}

interface OffsetManagerLike {
  groupId?: string;
  coordinator?: BrokerLike;
  cluster?: { findGroupCoordinator?(q: { groupId: string }): Promise<BrokerLike> };
}

interface ConnectionLike {
  host?: string;
  port?: number;
  connectionStatus?: string;
  authenticatedAt?: unknown;
  socket?: { destroy(): void };
  requestQueue?: { destroy(): void };
  /** When this connection last received bytes (ms epoch), stamped by fix 5. */
  __ffDataAt?: number;
  connectionTimeout?: number;
  isConnected(): boolean;
  rejectRequests(error: Error): void;
}

/** kafkajs' KafkaJSConnectionClosedError. */
type ClosedErrorClass = new (message: string, props: { host?: string; port?: number }) => Error;

interface ConnectionProto {
  connect(this: ConnectionLike): Promise<unknown>;
  send(this: ConnectionLike, protocol: { request?: { apiKey?: number } }): Promise<unknown>;
  processData(this: ConnectionLike, data: unknown): unknown;
}

interface OffsetManagerProto {
  getCoordinator(this: OffsetManagerLike): Promise<BrokerLike>;
}

const CONNECTION_ERRORS = new Set([
  "KafkaJSConnectionError",
  "KafkaJSConnectionClosedError",
  "KafkaJSRequestTimeoutError",
]);

function isConnectionError(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x && depth < 4; depth++) {
    if (x instanceof Error && CONNECTION_ERRORS.has(x.name)) return true;
    x = (x as { cause?: unknown; originalError?: unknown }).originalError ?? (x as { cause?: unknown }).cause;
  }
  return false;
}

/** How long a fetch from an unreachable broker pauses before that broker is tried again. */
const DEAD_BROKER_PAUSE_MS = 100;
/** How long record handling waits for an offset commit (see fix 3). */
const COMMIT_WAIT_MS = 250;
/** How long record handling waits for a group heartbeat (see fix 6). */
const HEARTBEAT_WAIT_MS = 100;

/** Kafka's API key of Produce (fix 5 never closes a connection for one of those). */
const PRODUCE_API_KEY = 0;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

let applied = false;

/** Applies the fixes (idempotent). Returns false if kafkajs' internals are not as expected. */
export function applyKafkaJsFailoverFixes(): boolean {
  if (applied) return true;
  const ConsumerGroup = require("kafkajs/src/consumer/consumerGroup.js") as { prototype: ConsumerGroupProto };
  const OffsetManager = require("kafkajs/src/consumer/offsetManager/index.js") as {
    prototype: OffsetManagerProto;
  };
  const Runner = require("kafkajs/src/consumer/runner.js") as { prototype: RunnerProto };
  const Connection = require("kafkajs/src/network/connection.js") as { prototype: ConnectionProto };
  const BrokerPool = require("kafkajs/src/cluster/brokerPool.js") as { prototype: BrokerPoolProto };
  const { KafkaJSConnectionClosedError } = require("kafkajs/src/errors.js") as {
    KafkaJSConnectionClosedError: ClosedErrorClass;
  };
  const proto = ConsumerGroup.prototype;
  const om = OffsetManager.prototype;
  const runner = Runner.prototype;
  if (
    typeof proto.heartbeat !== "function" ||
    typeof proto.recoverFromFetch !== "function" ||
    typeof proto.commitOffsets !== "function" ||
    typeof proto.commitOffsetsIfNecessary !== "function" ||
    typeof om.getCoordinator !== "function" ||
    typeof runner.fetch !== "function" ||
    typeof Connection.prototype.send !== "function" ||
    typeof Connection.prototype.connect !== "function" ||
    typeof BrokerPool.prototype.connect !== "function" ||
    typeof BrokerPool.prototype.findConnectedBroker !== "function" ||
    typeof Connection.prototype.processData !== "function" ||
    typeof KafkaJSConnectionClosedError !== "function"
  )
    return false;
  if (proto.__fastfenceFailover) return (applied = true);
  const heartbeat = proto.heartbeat;
  const recoverFromFetch = proto.recoverFromFetch;
  const commitOffsets = proto.commitOffsets;
  const commitOffsetsIfNecessary = proto.commitOffsetsIfNecessary;
  const getCoordinator = om.getCoordinator;
  const runnerFetch = runner.fetch;
  const connectionSend = Connection.prototype.send;
  const connectionConnect = Connection.prototype.connect;
  const processData = Connection.prototype.processData;

  const heartbeatOrLookup = async function (this: ConsumerGroupLike, opts: unknown) {
    try {
      return await heartbeat.call(this, opts);
    } catch (e) {
      const cluster = this.cluster;
      const groupId = this.groupId;
      if (!isConnectionError(e) || !cluster?.findGroupCoordinator || !groupId) throw e;
      kafkaJsTrouble.report();
      this.lastRequest = Date.now(); // next try after the heartbeat interval, not at once
      if (!this.__ffLookup) {
        const dead = this.coordinator?.nodeId;
        this.__ffLookup = cluster
          .findGroupCoordinator({ groupId })
          .then(
            (found) => {
              if (found.nodeId !== dead) this.coordinator = found;
            },
            () => undefined,
          )
          .finally(() => {
            this.__ffLookup = undefined;
          });
      }
      return undefined;
    }
  };
  proto.heartbeat = function (opts) {
    const failedLate = this.__ffBeatError;
    if (failedLate !== undefined) {
      this.__ffBeatError = undefined;
      return Promise.reject(failedLate instanceof Error ? failedLate : new Error(String(failedLate)));
    }
    if (this.__ffBeat) return Promise.resolve(); // one is still on its way
    let late = false;
    const beat = heartbeatOrLookup.call(this, opts);
    const tracked = beat.then(
      () => undefined,
      (e: unknown) => {
        if (late) this.__ffBeatError = e; // the caller had moved on: the next call throws it
      },
    );
    this.__ffBeat = tracked;
    void tracked.finally(() => {
      if (this.__ffBeat === tracked) this.__ffBeat = undefined;
    });
    // Within the wait the heartbeat's own outcome (a rebalance, errors) is the answer.
    return Promise.race([
      beat,
      sleep(HEARTBEAT_WAIT_MS).then(() => {
        late = true;
      }),
    ]);
  };

  proto.recoverFromFetch = async function (e) {
    if (!isConnectionError(e)) return recoverFromFetch.call(this, e);
    kafkaJsTrouble.report();
    if (this.cluster?.brokerPool) this.cluster.brokerPool.metadataExpireAt = null;
    await sleep(DEAD_BROKER_PAUSE_MS);
    return undefined; // this broker's fetch yields no batches; the other brokers' go on
  };

  const bounded = (group: ConsumerGroupLike, run: () => Promise<unknown>): Promise<unknown> => {
    if (group.__ffCommit) return Promise.resolve(); // one is still on its way
    const commit = run();
    const tracked = commit.then(
      () => undefined,
      () => undefined,
    );
    group.__ffCommit = tracked;
    void tracked.finally(() => {
      if (group.__ffCommit === tracked) group.__ffCommit = undefined;
    });
    // Within the wait the commit's own outcome (errors included) is the answer.
    return Promise.race([commit, sleep(COMMIT_WAIT_MS)]);
  };
  proto.commitOffsets = function (offsets) {
    return bounded(this, () => commitOffsets.call(this, offsets));
  };
  proto.commitOffsetsIfNecessary = function () {
    return bounded(this, () => commitOffsetsIfNecessary.call(this));
  };
  om.getCoordinator = async function () {
    try {
      return await getCoordinator.call(this);
    } catch (e) {
      const groupId = this.groupId;
      if (!groupId || !this.cluster?.findGroupCoordinator) throw e;
      this.coordinator = await this.cluster.findGroupCoordinator({ groupId });
      return this.coordinator;
    }
  };
  runner.fetch = async function (nodeId) {
    if (this.running) return runnerFetch.call(this, nodeId);
    // Not awaited: the fetcher asking is one of those it waits for, and it ends only once
    // this answer has reached it.
    void this.fetchManager?.stop().catch(() => undefined);
    await new Promise<void>((r) => setImmediate(r));
    return [];
  };
  Connection.prototype.processData = function (data) {
    this.__ffDataAt = Date.now();
    clearSuspect(this.host, this.port); // it answers (fix 7)
    return processData.call(this, data);
  };
  Connection.prototype.connect = async function () {
    const started = Date.now();
    try {
      return await connectionConnect.call(this);
    } catch (e) {
      // A connection timeout, not a refusal: accepted and never answered (fix 7).
      if (this.connectionTimeout !== undefined && Date.now() - started >= this.connectionTimeout)
        markSuspect(this.host, this.port);
      throw e;
    }
  };
  patchBrokerPool(BrokerPool.prototype);
  Connection.prototype.send = async function (protocol) {
    try {
      return await connectionSend.call(this, protocol);
    } catch (e) {
      const timedOut = e as { name?: string; sentAt?: number } | undefined;
      if (
        timedOut?.name === "KafkaJSRequestTimeoutError" &&
        protocol.request?.apiKey !== PRODUCE_API_KEY &&
        this.isConnected() &&
        (this.__ffDataAt ?? 0) < (timedOut.sentAt ?? Date.now())
      ) {
        markSuspect(this.host, this.port); // fix 7
        closeSilentConnection(this, KafkaJSConnectionClosedError);
      }
      throw e;
    }
  };
  proto.__fastfenceFailover = true;
  return (applied = true);
}

/**
 * Fix 5: closes a silent connection whose request timed out, at once and without waiting for its
 * other requests (kafkajs' own disconnect waits for them, and on a silent broker each waits
 * out its timeout). Those fail as on a connection the server closed, which every caller in
 * kafkajs already handles (retried, or the fetch of fix 2 returns nothing).
 */
function closeSilentConnection(conn: ConnectionLike, ClosedError: ClosedErrorClass): void {
  kafkaJsTrouble.report();
  conn.connectionStatus = "disconnected"; // kafkajs' CONNECTION_STATUS.DISCONNECTED
  conn.authenticatedAt = null; // a new connection authenticates again
  conn.rejectRequests(
    new ClosedError("Closed connection after a request timed out", { host: conn.host, port: conn.port }),
  );
  conn.requestQueue?.destroy(); // its timeout check; connect() starts a new one
  conn.socket?.destroy();
}
