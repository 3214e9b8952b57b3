// The KRaft controller's session-timeout fencings of lab brokers, read from the brokers' own
// log files (the active controller logs each one). With the shipped 1 s broker session a
// broker starved of CPU for a second is fenced though it runs: its partitions' leaders and
// group coordinators move and every client rejoins. The lab reports them so a slow start or
// a disturbed trial says so. Reads log files only; never talks to a broker.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface BrokerFencing {
  /** The log line's timestamp as written (the broker JVM's local time), "10:28:54.631". */
  time: string;
  /** That timestamp read as UTC, ms: for ordering only. */
  at: number;
  broker: number;
}

const LINE =
  /^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\] INFO \[QuorumController id=\d+\] Fencing broker (\d+) at epoch \d+ because its session has timed out/;

/** The session-timeout fencings in one broker log's text, in order. */
export function parseFencings(text: string): BrokerFencing[] {
  const out: BrokerFencing[] = [];
  for (const line of text.split("\n")) {
    const m = LINE.exec(line);
    if (m)
      out.push({ time: `${m[2]}.${m[3]}`, at: Date.parse(`${m[1]}T${m[2]}.${m[3]}Z`), broker: Number(m[4]) });
  }
  return out;
}

/** Every node's broker log merged: each fencing once, oldest first. */
export function brokerFencings(nodes: readonly { dir: string }[]): BrokerFencing[] {
  const seen = new Map<string, BrokerFencing>();
  for (const x of nodes) {
    const path = join(x.dir, "kafka", "kafka.log");
    if (!existsSync(path)) continue;
    for (const f of parseFencings(readFileSync(path, "utf8"))) seen.set(`${f.at}/${f.broker}`, f);
  }
  return [...seen.values()].sort((a, b) => a.at - b.at);
}

/** "2 (broker 2 at 10:28:54.631, broker 3 at 10:29:07.798)", or "none". */
export function fencingsText(fs: readonly BrokerFencing[]): string {
  if (fs.length === 0) return "none";
  return `${fs.length} (${fs.map((f) => `broker ${f.broker} at ${f.time}`).join(", ")})`;
}
