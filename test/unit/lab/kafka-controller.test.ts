// Which node is the active KRaft controller, read from the voters' quorum-state files (the
// format Kafka 4.x writes: QuorumStateData as JSON, leaderId -1 while there is no leader).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { activeControllerId } from "../../../lab/kafka.ts";

const dirs: string[] = [];
function voter(state: string | undefined): string {
  const d = mkdtempSync(join(tmpdir(), "ff-quorum-"));
  dirs.push(d);
  if (state !== undefined) {
    mkdirSync(join(d, "data", "__cluster_metadata-0"), { recursive: true });
    writeFileSync(join(d, "data", "__cluster_metadata-0", "quorum-state"), state);
  }
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("activeControllerId", () => {
  it("is the leader the voters follow", () => {
    const s =
      '{"leaderId":2,"leaderEpoch":7,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}';
    expect(activeControllerId([voter(s), voter(s), voter(s)])).toBe(2);
  });

  it("takes the highest epoch: a dead voter's file names the old leader", () => {
    const stale = '{"leaderId":1,"leaderEpoch":7,"votedId":-1,"data_version":1}';
    const fresh = '{"leaderId":3,"leaderEpoch":9,"votedId":3,"data_version":1}';
    expect(activeControllerId([voter(stale), voter(fresh), voter(fresh)])).toBe(3);
  });

  it("is undefined with no leader, no file or an unreadable file", () => {
    const none = '{"leaderId":-1,"leaderEpoch":4,"votedId":2,"data_version":1}';
    expect(activeControllerId([voter(none), voter(undefined), voter("{not json")])).toBeUndefined();
    expect(activeControllerId([])).toBeUndefined();
  });
});
