// Event-source coverage (infra/runtime/source-coverage.ts), with a fake Kube holding the
// heartbeat Leases: a Ready node whose event source renewed its Lease within the Lease's
// duration plus the policy's clock-skew allowance is 1, one with a stale or missing Lease
// 0, a node that is not Ready has no series, and a node that goes away loses its series.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../core/clock.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import { createLogger } from "../../../infra/log.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import { startSourceCoverage } from "../../../infra/runtime/source-coverage.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

const T0 = Date.parse("2026-11-01T10:00:00.000Z");

describe("event-source coverage", () => {
  it("says which Ready nodes have a live event source", async () => {
    const leases: { name: string; renewMs: number }[] = [
      { name: "node-a", renewMs: T0 - 1000 }, // fresh
      { name: "node-b", renewMs: T0 - 60_000 }, // stale: its source is gone
    ];
    const kube = kubeAnswering(async (_what: string, fn: (apis: unknown) => Promise<unknown>) =>
      fn({
        coordination: {
          listNamespacedLease: async () => ({
            items: leases.map((l) => ({
              metadata: { name: `fastfence-alive-${l.name}` },
              spec: { renewTime: new Date(l.renewMs), leaseDurationSeconds: 4 },
            })),
          }),
        },
      }),
    );
    const nodes = [
      { name: "node-a", ready: "True" as const },
      { name: "node-b", ready: "True" as const },
      { name: "node-c", ready: "True" as const }, // no Lease at all
      { name: "node-d", ready: "Unknown" as const }, // down: its incident says more
    ];
    const m = createFunctionMetrics({ defaultMetrics: false });
    const cov = startSourceCoverage({
      kube,
      namespace: "fastfence-system",
      nodes: { list: async () => nodes },
      policy: async () => resolvePolicy({}),
      metrics: m,
      clock: new ManualClock(T0),
      log: createLogger("coverage-test", { level: "silent" }),
    });
    await cov.pass();
    let t = await m.registry.metrics();
    expect(t).toContain('fastfence_event_source_up{node="node-a"} 1');
    expect(t).toContain('fastfence_event_source_up{node="node-b"} 0');
    expect(t).toContain('fastfence_event_source_up{node="node-c"} 0');
    expect(t).not.toContain('node="node-d"');
    nodes.splice(2, 1); // node-c deleted
    await cov.pass();
    cov.stop();
    t = await m.registry.metrics();
    expect(t).not.toContain('node="node-c"');
  });
});
