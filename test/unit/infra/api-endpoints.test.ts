// ApiEndpointDiscovery (infra/kube/api-endpoints.ts) on plain data: the slice reads are a
// function of the test's, the log a recorder. A failed read keeps the last list and is
// logged once per failing spell; a read that changed nothing calls nobody; an early read
// after a failover is rate-limited. (Against real API servers:
// test/integration/kube-endpoint-failover.test.ts.)
import { describe, expect, it } from "vitest";
import type { SliceLike } from "../../../core/kube-endpoints.ts";
import { ApiEndpointDiscovery } from "../../../infra/kube/api-endpoints.ts";
import type { Logger } from "../../../infra/log.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const slice = (...ips: string[]): SliceLike => ({
  addressType: "IPv4",
  endpoints: ips.map((a) => ({ addresses: [a] })),
  ports: [{ name: "https", port: 6443 }],
});

function recorder(): { log: Logger; lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const at = (level: string) => (_o: unknown, msg: string) => void lines.push({ level, msg });
  return { log: { info: at("info"), warn: at("warn") } as unknown as Logger, lines };
}

describe("ApiEndpointDiscovery", () => {
  it("follows the slice, keeps the last list through failed reads and logs the spell once", async () => {
    const answers: (SliceLike | Error)[] = [
      slice("10.0.0.2", "10.0.0.1"),
      new Error("timeout"),
      new Error("timeout"),
      new Error("timeout"),
      slice("10.0.0.1", "10.0.0.2"),
      slice("10.0.0.1"),
    ];
    let reads = 0;
    const changes: string[][] = [];
    const { log, lines } = recorder();
    const d = new ApiEndpointDiscovery({
      read: async () => {
        const a = answers[Math.min(reads++, answers.length - 1)]!;
        if (a instanceof Error) throw a;
        return a;
      },
      onChange: (u) => void changes.push([...u]),
      log,
      policy: { intervalMs: 10, retryMs: 5, minSpacingMs: 1 },
    });
    d.start();
    await d.ready();
    expect(d.discovered).toEqual(["https://10.0.0.1:6443", "https://10.0.0.2:6443"]);
    for (let i = 0; i < 200 && reads < 3; i++) await sleep(5);
    expect(d.discovered).toEqual(["https://10.0.0.1:6443", "https://10.0.0.2:6443"]); // kept while failing
    for (let i = 0; i < 200 && reads < 7; i++) await sleep(5);
    d.stop();
    expect(changes).toEqual([["https://10.0.0.1:6443", "https://10.0.0.2:6443"], ["https://10.0.0.1:6443"]]);
    expect(lines.filter((l) => l.level === "warn")).toHaveLength(1); // three failed reads, one line
    expect(lines.filter((l) => /works again/.test(l.msg))).toHaveLength(1);
    const after = reads;
    await sleep(50);
    expect(reads).toBe(after); // stopped: no more reads
  });

  it("starts an early read after a failover at most once per spacing", async () => {
    let reads = 0;
    const { log } = recorder();
    const d = new ApiEndpointDiscovery({
      read: async () => {
        reads++;
        return slice("10.0.0.1");
      },
      onChange: () => undefined,
      log,
      policy: { intervalMs: 60_000, retryMs: 1000, minSpacingMs: 60_000 },
    });
    d.start();
    await d.ready();
    for (let i = 0; i < 5; i++) d.requestEarly();
    await sleep(20);
    d.stop();
    expect(reads).toBe(1); // the first read was within the spacing: no early one
  });
});
