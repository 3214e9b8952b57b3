// FASTFENCE_LAB_KEEP_LOGS: before the lab is torn down, copies each node's logs (its
// processes' and its Kafka broker's) to .cache/lab-logs/<node>/ for a post-mortem. Reads the
// node dirs and writes under .cache only; never deletes anything.
import { cpSync, existsSync, readdirSync } from "node:fs";
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
