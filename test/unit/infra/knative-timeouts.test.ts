// The Knative end of the timeout chain (docs/tuning.md): in every rendered overlay, the
// fence Service's timeoutSeconds and the delivery.timeout of every Trigger that delivers to
// fence exceed the longest round deadline the FencingPolicy CRD allows (powerOffTimeoutMs
// at its schema maximum plus the round's recording margin), so Knative never cuts a
// fencing round that the policy permits. Raising the schema's cap without the manifests
// (or lowering the manifests) fails here.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { crdSchemas } from "../../../core/crdschema.ts";
import { MAX_POWER_OFF_TIMEOUT_MS, ROUND_RECORD_MARGIN_MS, roundDeadline } from "../../../core/policy.ts";
import { KNATIVE_DIR, render, type KubeObject } from "../../../harness/kustomize.ts";

/** ISO-8601 durations as Knative writes them (PT300S, PT5M, PT0.05S), in ms. */
function isoMs(d: string): number {
  const m = /^PT(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$/.exec(d);
  if (!m || (!m[1] && !m[2])) throw new Error(`unsupported duration ${d}`);
  return Number(m[1] ?? 0) * 60_000 + Number(m[2] ?? 0) * 1000;
}

interface Service {
  spec: { template: { spec: { timeoutSeconds?: number } } };
}
interface Trigger {
  metadata: { name: string };
  spec: { subscriber: { ref?: { kind: string; name: string } }; delivery?: { timeout?: string } };
}

/** The longest round deadline a policy the CRD accepts can ask for, ms. */
const LONGEST = roundDeadline(0, MAX_POWER_OFF_TIMEOUT_MS);

describe("Knative timeouts exceed the longest fencing round the CRD allows", () => {
  it("the CRD's cap is the one the manifests were sized for", () => {
    const spec = crdSchemas().fencingPolicySpec as {
      properties: { timeouts: { properties: { powerOffTimeoutMs: { maximum: number } } } };
    };
    expect(spec.properties.timeouts.properties.powerOffTimeoutMs.maximum).toBe(MAX_POWER_OFF_TIMEOUT_MS);
    expect(LONGEST).toBe(MAX_POWER_OFF_TIMEOUT_MS + ROUND_RECORD_MARGIN_MS);
  });

  it.each(["vanilla", "openshift"])("overlay %s", (overlay) => {
    const objects: KubeObject[] = render(join(KNATIVE_DIR, "overlays", overlay));
    const svc = objects.find(
      (o) =>
        o.kind === "Service" && o.apiVersion.startsWith("serving.knative.dev") && o.metadata.name === "fence",
    ) as unknown as Service | undefined;
    expect(svc).toBeDefined();
    const serviceMs = (svc!.spec.template.spec.timeoutSeconds ?? 300) * 1000;
    expect(serviceMs).toBeGreaterThan(LONGEST);

    const triggers = objects
      .filter((o) => o.kind === "Trigger")
      .map((o) => o as unknown as Trigger)
      .filter((t) => t.spec.subscriber.ref?.kind === "Service" && t.spec.subscriber.ref.name === "fence");
    expect(triggers.map((t) => t.metadata.name).sort()).toEqual([
      "fence-fence-failed",
      "fence-fence-requested",
    ]);
    for (const t of triggers) {
      const timeout = t.spec.delivery?.timeout;
      expect(timeout, `${t.metadata.name} sets delivery.timeout`).toBeDefined();
      expect(isoMs(timeout!), `${t.metadata.name} delivery.timeout`).toBeGreaterThan(LONGEST);
    }
  });

  it("reads Knative's durations", () => {
    expect([isoMs("PT300S"), isoMs("PT5M"), isoMs("PT0.05S"), isoMs("PT1M30S")]).toEqual([
      300_000, 300_000, 50, 90_000,
    ]);
  });
});
