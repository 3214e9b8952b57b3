// agentLogTails: what a failed `lab up` prints of each node agent before teardown removes
// the node dirs — the step of each agent not ready and its logs' last lines (agent, launcher,
// kwok); nothing of a ready agent's node.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { agentLogTails } from "../../../lab/keep-logs.ts";

let root: string | undefined;
afterEach(() => {
  if (root) rmSync(root, { recursive: true, force: true });
  root = undefined;
});

function node(name: string, status?: Record<string, unknown>, log?: string): { name: string; dir: string } {
  root ??= mkdtempSync(join(tmpdir(), "ff-keep-logs-"));
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  if (status) writeFileSync(join(dir, "agent.json"), JSON.stringify(status));
  if (log !== undefined) writeFileSync(join(dir, "agent.log"), log);
  return { name, dir };
}

describe("agentLogTails", () => {
  it("names each unready agent's step, then its logs' last lines; a ready agent's node not at all", () => {
    const lines = Array.from({ length: 20 }, (_, i) => `{"msg":"line ${i}"}`).join("\n") + "\n";
    const nodes = [
      node("node-a", { ready: true, step: "ready" }, "{}\n"),
      node("node-b", { ready: false, step: "starting replicas" }, lines),
      node("node-c", { failed: "creating ACLs", lastError: "acls: no broker answered" }),
      node("node-d"),
    ];
    writeFileSync(
      join(root!, "node-c", "kwok.log"),
      ["k1", "k2", "k3", "k4", "k5", "k6", "k7", ""].join("\n"),
    );
    writeFileSync(join(root!, "node-a", "kwok.log"), "not shown\n");
    const out = agentLogTails(nodes, 3);
    expect(out).toEqual([
      "node-b: agent at starting replicas",
      '  node-b agent.log: {"msg":"line 17"}',
      '  node-b agent.log: {"msg":"line 18"}',
      '  node-b agent.log: {"msg":"line 19"}',
      "node-c: agent failed at creating ACLs, last error acls: no broker answered",
      "  node-c kwok.log: k4",
      "  node-c kwok.log: k5",
      "  node-c kwok.log: k6",
      "  node-c kwok.log: k7",
      "node-d: agent wrote no status",
    ]);
  });

  it("cuts a long line and reads a torn agent.json as no status", () => {
    const n = node("node-b", undefined, `${"x".repeat(1000)}\n`);
    writeFileSync(join(n.dir, "agent.json"), '{"ready": tr');
    const [head, line] = agentLogTails([n]);
    expect(head).toBe("node-b: agent wrote no status");
    expect(line).toHaveLength("  node-b agent.log: ".length + 400);
    expect(line!.endsWith("…")).toBe(true);
  });
});
