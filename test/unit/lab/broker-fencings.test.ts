// The controller's session-timeout fencings read from lab broker logs (lab/broker-fencings.ts):
// only those lines count, each fencing once though two logs hold it, oldest first.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { brokerFencings, fencingsText, parseFencings } from "../../../lab/broker-fencings.ts";

const fencing = (ts: string, broker: number) =>
  `[2026-12-07 ${ts}] INFO [QuorumController id=2] Fencing broker ${broker} at epoch 19 because its session has timed out. (org.apache.kafka.controller.ReplicationControlManager)`;
const unrelated = [
  "[2026-12-07 10:28:42,298] INFO [BrokerServer id=2] Waiting for the broker to be unfenced (kafka.server.BrokerServer)",
  "[2026-12-07 10:28:43,018] INFO [BrokerLifecycleManager id=2] The broker has been unfenced. Transitioning from RECOVERY to RUNNING. (kafka.server.BrokerLifecycleManager)",
  "[2026-12-07 10:28:54,844] INFO [QuorumController id=2] The request from broker 2 to unfence has been granted because it has caught up with the offset of its register broker record 19.",
];

describe("broker fencings from the lab brokers' logs", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const node = (lines: string[]) => {
    const dir = mkdtempSync(join(tmpdir(), "ff-fencings-"));
    dirs.push(dir);
    mkdirSync(join(dir, "kafka"));
    writeFileSync(join(dir, "kafka", "kafka.log"), lines.join("\n") + "\n");
    return { dir };
  };

  it("reads only the session-timeout fencings, with their time and broker", () => {
    const fs = parseFencings(
      [...unrelated, fencing("10:28:54,631", 2), fencing("10:29:07,798", 3)].join("\n"),
    );
    expect(fs.map((f) => [f.time, f.broker])).toEqual([
      ["10:28:54.631", 2],
      ["10:29:07.798", 3],
    ]);
    expect(parseFencings(unrelated.join("\n"))).toEqual([]);
  });

  it("merges the nodes' logs: once each, oldest first; a node without a log is skipped", () => {
    const a = node([fencing("10:29:07,798", 3), fencing("10:28:54,631", 2)]);
    const b = node([...unrelated, fencing("10:28:54,631", 2)]); // a later active controller's copy
    const fs = brokerFencings([a, b, { dir: join(a.dir, "absent") }]);
    expect(fencingsText(fs)).toBe("2 (broker 2 at 10:28:54.631, broker 3 at 10:29:07.798)");
    expect(fencingsText(brokerFencings([node(unrelated)]))).toBe("none");
  });
});
