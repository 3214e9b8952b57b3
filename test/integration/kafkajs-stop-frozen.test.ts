// Needs real Kafka (3 brokers), a child process: a stop racing a frozen broker's fencing.
// A kafkajs consumer stopped while one broker is frozen (SIGSTOP) ends its stop and leaves
// its process's event loop free (issue 14, chaos seed 99). kafkajs rebuilds its fetchers (one
// per broker) when the set of brokers changes, as when the frozen one is fenced and leaves
// the metadata: it stops the old fetchers, waits for them to end, then starts new ones. If
// the consumer is stopped in between, the new fetchers start on a runner that no longer runs,
// whose fetch answers nothing at once: without fastfence's fix they loop on microtasks for
// good, no timer of the process fires again and the stop never ends. In a real process that
// window lasts as long as the slowest old fetcher takes to end (one waiting on the frozen
// broker's request, say); here the child stops its consumer from kafkajs' own "Stopping
// fetchers..." log line, so every run hits it. The consumer runs in a child process
// (kafkajs-stop-child.ts) so that a starved event loop shows as missing ticks here.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { Kafka, logLevel } from "kafkajs";
import { coordinatorPartition, startKafka } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createTopicsWithLeaders } from "../../infra/bus/kafkajs-topics.ts";
import type { StopChildConfig } from "./kafkajs-stop-child.ts";

/** The child's request timeout (the bus's default). */
const REQUEST_TIMEOUT_MS = 1_000;
/** The longest pause between two of the child's 100 ms ticks taken as a live event loop. */
const MAX_TICK_GAP_MS = 1_000;
/**
 * The stop ends once the old fetchers have ended (a request in flight to the frozen broker
 * times out within REQUEST_TIMEOUT_MS) and the group is left (a request to a live
 * coordinator); 4 s for scheduling.
 */
const STOP_BOUND_MS = REQUEST_TIMEOUT_MS + 4_000;
/** After the stop, the child's CPU use over this span must be that of an idle process. */
const IDLE_SPAN_MS = 2_000;

const CHILD = fileURLToPath(new URL("./kafkajs-stop-child.ts", import.meta.url));

interface Line {
  at: number;
  tick?: number;
  cpuMs?: number;
  joined?: number;
  stopping?: number;
  stopped?: number;
  error?: string;
}

describe("a kafkajs consumer stopped while a broker is frozen", () => {
  const env = withEnv(async (scope) => ({ kafka: scope.add(await startKafka({ brokers: 3 })) }));

  it("ends its stop and keeps its process's timers firing", async () => {
    const { kafka } = env();
    const security = kafka.clientSecurity("admin");
    const victim = kafka.brokers[2]!; // leads partition 0, never a seed broker of the clients
    const admin = new Kafka({
      clientId: "stop-admin",
      brokers: kafka.bootstrap.split(","),
      ...security,
      logLevel: logLevel.NOTHING,
    }).admin();
    const topic = "t.stop-frozen";
    let child: ChildProcess | undefined;
    try {
      await admin.connect();
      const [a, b, c] = kafka.brokers.map((x) => x.id) as [number, number, number];
      await createTopicsWithLeaders(admin, [
        {
          topic,
          replicaAssignment: [
            { partition: 0, replicas: [c, a, b] },
            { partition: 1, replicas: [a, b, c] },
            { partition: 2, replicas: [b, c, a] },
          ],
          configEntries: [{ name: "min.insync.replicas", value: "1" }],
        },
      ]);
      // A group whose coordinator is not the broker to be frozen (creates __consumer_offsets).
      const probe = new Kafka({
        clientId: "stop-probe",
        brokers: kafka.bootstrap.split(","),
        ...security,
        logLevel: logLevel.NOTHING,
      }).consumer({ groupId: "g-probe" });
      await probe.connect();
      await probe.subscribe({ topics: [topic] });
      await probe.run({ eachMessage: async () => undefined });
      await new Promise((r) => setTimeout(r, 1_000));
      await probe.disconnect();
      const offsets = (await admin.fetchTopicMetadata({ topics: ["__consumer_offsets"] })).topics[0]!;
      const groupId = Array.from({ length: 20 }, (_, i) => `g-stop-${i}`).find(
        (g) =>
          offsets.partitions.find((p) => p.partitionId === coordinatorPartition(g))?.leader !== victim.id,
      )!;
      const seeds = kafka.bootstrap.split(",").filter((hp) => !hp.endsWith(`:${victim.port}`));
      expect(seeds).toHaveLength(2);

      const cfg: StopChildConfig = {
        brokers: seeds,
        security,
        topic,
        groupId,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
      };
      child = spawn(process.execPath, [CHILD], {
        env: { ...process.env, FASTFENCE_STOP_CHILD: JSON.stringify(cfg) },
        stdio: ["pipe", "pipe", "inherit"],
      });
      const lines: Line[] = [];
      createInterface({ input: child.stdout! }).on("line", (l) => {
        try {
          lines.push({ at: Date.now(), ...(JSON.parse(l) as Omit<Line, "at">) });
        } catch {
          lines.push({ at: Date.now(), error: `not JSON: ${l}` });
        }
      });
      const waitFor = async (what: string, ok: () => boolean, ms: number) => {
        const t0 = Date.now();
        while (!ok()) {
          const err = lines.find((l) => l.error);
          if (err) throw new Error(`child: ${err.error}`);
          if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      await waitFor("the child's consumer joined its group", () => lines.some((l) => l.joined), 60_000);
      await new Promise((r) => setTimeout(r, 1_500)); // fetching from all three brokers

      const frozenAt = Date.now();
      victim.freeze();
      child.stdin!.write("arm\n");
      // The controller fences the frozen broker (2 s broker session in the harness) and the
      // child's next metadata refresh (every 500 ms) no longer lists it.
      await waitFor("kafkajs began rebuilding its fetchers", () => lines.some((l) => l.stopping), 20_000);
      const stoppingAt = lines.find((l) => l.stopping)!.at;
      const deadline = stoppingAt + STOP_BOUND_MS + IDLE_SPAN_MS + 1_000;
      while (Date.now() < deadline) {
        const stopped = lines.find((l) => l.stopped);
        if (stopped && Date.now() > stopped.at + IDLE_SPAN_MS) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const ticks = lines.filter((l) => l.tick !== undefined && l.at >= frozenAt);
      const gaps = ticks.slice(1).map((t, i) => t.at - ticks[i]!.at);
      const lastTickAgo = Date.now() - (ticks.at(-1)?.at ?? frozenAt);
      const stopped = lines.find((l) => l.stopped);
      console.log(
        `froze broker ${victim.id} at +0; fetchers rebuilt (stop begun) at +${stoppingAt - frozenAt} ms; stop ended ${stopped ? `at +${stopped.at - frozenAt} ms` : "never"}; ${ticks.length} ticks, longest gap ${Math.max(0, ...gaps)} ms, last tick ${lastTickAgo} ms ago`,
      );
      expect(lastTickAgo, "the child's event loop is starved: no timer fired").toBeLessThan(MAX_TICK_GAP_MS);
      expect(Math.max(0, ...gaps)).toBeLessThan(MAX_TICK_GAP_MS);
      expect(stopped, `the stop did not end within ${STOP_BOUND_MS} ms`).toBeDefined();
      expect(stopped!.at - stoppingAt).toBeLessThan(STOP_BOUND_MS);
      const idle = ticks.filter((t) => t.at >= stopped!.at);
      const cpu = idle.at(-1)!.cpuMs! - idle[0]!.cpuMs!;
      const wall = idle.at(-1)!.at - idle[0]!.at;
      console.log(`after the stop: ${cpu.toFixed(0)} ms of CPU in ${wall} ms`);
      expect(wall).toBeGreaterThan(IDLE_SPAN_MS / 2);
      expect(cpu / wall, "the stopped consumer still spins").toBeLessThan(0.3);
    } finally {
      child?.kill("SIGKILL");
      victim.thaw();
      await admin.disconnect().catch(() => undefined);
    }
  });
});
