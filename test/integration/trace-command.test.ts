// Needs real Kafka: the audit principal reads the Broker's topic through TLS, SCRAM and ACLs.
// `fastfence trace` against real Kafka (TLS + SCRAM, the manifests' ACLs), as the
// read-only audit principal: in the Knative layout every event is on the Broker's topic
// (fastfence.events), and the trace finds the incident there without --topic; --since
// limits what it reads (an incident published before that time is not found, the one
// published after is; "all" reads everything); progress goes to stderr, the chain to
// stdout.
import { writeFileSync } from "node:fs";
import { makeTempDir, removeTempDir } from "../../harness/env/registry.ts";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { traceCommand } from "../../cli/trace.ts";
import { EXIT } from "../../cli/exit-codes.ts";
import { BROKER_TOPIC, EVENT_TYPES } from "../../events/catalog.ts";
import { encodeKafka } from "../../events/codec.ts";
import { kafkaUserName } from "../../events/kafka-acls.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { sharedKafka } from "../../harness/env/shared-kafka.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { BOOT, event, suspected } from "../scenarios/fixtures.ts";

const env = withEnv(async (scope) => scope.add(await sharedKafka()));

/** suspicion → fence.requested → node.fenced for `node`'s incident. */
function chain(node: "a" | "b") {
  const s = suspected(node === "a" ? "b" : "a", node, 1000);
  const incident = (s.data as { incident: string }).incident;
  const meta = (ms: number, component: "confirm" | "fence") => ({ incident, timeMs: ms, component });
  return {
    incident,
    events: [
      s,
      event(
        EVENT_TYPES.fenceRequested,
        node,
        {
          incident,
          node,
          bootId: BOOT[node],
          confirmedAt: new Date(1500).toISOString(),
          observers: ["b", "c"],
        },
        meta(1500, "confirm"),
      ),
      event(
        EVENT_TYPES.nodeFenced,
        node,
        {
          incident,
          node,
          bootId: BOOT[node],
          round: 1,
          level: 0,
          driver: "redfish",
          attempts: 1,
          powerOffConfirmedAt: new Date(2100).toISOString(),
        },
        meta(2100, "fence"),
      ),
    ],
  };
}

async function trace(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  const code = await traceCommand(argv);
  vi.restoreAllMocks();
  return { code, out: out.join("\n"), err: err.join("\n") };
}

afterEach(() => vi.restoreAllMocks());

describe("fastfence trace on the Broker's topic", () => {
  it("finds the incident without --topic, and --since limits what it reads", async () => {
    const k = env();
    const admin = createKafkaBus({
      brokers: k.bootstrap,
      clientId: "setup",
      security: k.clientSecurity("admin"),
    });
    await admin.ensureTopics([{ topic: BROKER_TOPIC, partitions: 3, replicationFactor: 1 }]);
    const early = chain("a");
    await admin.publish(BROKER_TOPIC, early.events.map(encodeKafka));
    await new Promise((r) => setTimeout(r, 1500));
    const mid = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 500));
    const late = chain("b");
    await admin.publish(BROKER_TOPIC, late.events.map(encodeKafka));
    await admin.close();

    // The audit principal's credentials, as a user's shell would hold them.
    const dir = makeTempDir("trace");
    const sec = k.clientSecurity("audit");
    writeFileSync(join(dir, "ca.pem"), sec.ssl!.ca);
    writeFileSync(join(dir, "password"), sec.sasl!.password);
    const saved = { ...process.env };
    Object.assign(process.env, {
      FASTFENCE_KAFKA_BROKERS: k.bootstrap,
      FASTFENCE_KAFKA_CA_FILE: join(dir, "ca.pem"),
      FASTFENCE_KAFKA_USERNAME: kafkaUserName("audit"),
      FASTFENCE_KAFKA_PASSWORD_FILE: join(dir, "password"),
    });
    delete process.env.FASTFENCE_KAFKA_TOPIC;
    try {
      const found = await trace([late.incident, "--no-api", "-o", "json"]);
      expect(found.code, found.err).toBe(EXIT.ok);
      const rows = JSON.parse(found.out) as { type: string; incident?: string }[];
      expect(rows.map((r) => `io.fastfence.${r.type}`)).toEqual([
        EVENT_TYPES.nodeSuspected,
        EVENT_TYPES.fenceRequested,
        EVENT_TYPES.nodeFenced,
      ]);

      const since = await trace([early.incident, "--no-api", "--since", mid, "-o", "json"]);
      expect(since.code).toBe(EXIT.failed); // published before --since: not read
      const sinceLate = await trace([late.incident, "--no-api", "--since", mid]);
      expect(sinceLate.code, sinceLate.err).toBe(EXIT.ok);
      expect(sinceLate.out).toContain("node.fenced");

      const all = await trace([early.incident, "--no-api", "--since", "all", "-o", "json"]);
      expect(all.code, all.err).toBe(EXIT.ok);
      expect((JSON.parse(all.out) as unknown[]).length).toBe(3);
    } finally {
      process.env = saved;
      removeTempDir(dir);
    }
  });
});
