// Post-mortems of a lab's nodes before teardown removes their dirs. FASTFENCE_LAB_KEEP_LOGS:
// copies each node's logs (its processes' and its Kafka broker's) to .cache/lab-logs/<node>/;
// a failed start: the step each unready agent was on and its log's last lines. Reads the node
// dirs and writes under .cache only; never deletes anything.
import { cpSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./state.ts";

export function keepNodeLogs(nodes: readonly { name: string; dir: string }[]): void {
  const keep = join(ROOT, ".cache", "lab-logs");
  for (const x of nodes)
    for (const f of existsSync(x.dir) ? readdirSync(x.dir).filter((f) => f.endsWith(".log")) : [])
      cpSync(join(x.dir, f), join(keep, x.name, f));
  for (const x of nodes) {
    const brokerLog = join(x.dir, "kafka", "kafka.log"); // the broker's own log4j file
    if (existsSync(brokerLog)) cpSync(brokerLog, join(keep, x.name, "broker.log"));
  }
}

/** The logs a failed start shows the end of, besides the agent's: the node's power-on and kubelet. */
const START_LOGS = ["launcher.log", "kwok.log"];

/**
 * For each node whose agent is not ready: the step it was on, then the last `lines` lines of
 * its agent.log and the last few of its launcher's and kwok's logs.
 */
export function agentLogTails(nodes: readonly { name: string; dir: string }[], lines = 12): string[] {
  const out: string[] = [];
  for (const x of nodes) {
    const status = readJson(join(x.dir, "agent.json"));
    if (status?.ready === true) continue;
    const at =
      typeof status?.failed === "string"
        ? `failed at ${status.failed}`
        : `at ${String(status?.step ?? "no step")}`;
    const last = typeof status?.lastError === "string" ? `, last error ${status.lastError}` : "";
    out.push(`${x.name}: agent ${status ? at : "wrote no status"}${last}`);
    for (const [file, n] of [["agent.log", lines] as const, ...START_LOGS.map((f) => [f, 4] as const)]) {
      const log = join(x.dir, file);
      if (!existsSync(log)) continue;
      for (const l of readFileSync(log, "utf8").trimEnd().split("\n").slice(-n))
        out.push(`  ${x.name} ${file}: ${l.length > 400 ? `${l.slice(0, 399)}…` : l}`);
    }
  }
  return out;
}

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
