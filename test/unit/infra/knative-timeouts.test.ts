// The Knative end of the timeout chain (docs/tuning.md): no Knative timeout can cut a
// fencing round, because Knative delivers nothing to fence. In every rendered overlay the
// fence Service runs `--kafka` (it consumes its catalog topics, so the round's only bound
// is its own deadline, core/policy.ts roundDeadline) and no Trigger subscribes it. A
// manifest that put fence back behind a Trigger (whose delivery.timeout and the Service's
// timeoutSeconds would then have to exceed the longest round the FencingPolicy CRD
// allows) fails here.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { crdSchemas } from "../../../core/crdschema.ts";
import { MAX_POWER_OFF_TIMEOUT_MS, ROUND_RECORD_MARGIN_MS, roundDeadline } from "../../../core/policy.ts";
import { KNATIVE_DIR, render, type KubeObject } from "../../../harness/kustomize.ts";

interface Service {
  spec: { template: { spec: { containers: { args: string[] }[] } } };
}
interface Trigger {
  metadata: { name: string };
  spec: { subscriber: { ref?: { kind: string; name: string } } };
}

describe("no Knative timeout can cut a fencing round", () => {
  it("the CRD's cap is the round deadline the runtime extends to", () => {
    const spec = crdSchemas().fencingPolicySpec as {
      properties: { timeouts: { properties: { powerOffTimeoutMs: { maximum: number } } } };
    };
    expect(spec.properties.timeouts.properties.powerOffTimeoutMs.maximum).toBe(MAX_POWER_OFF_TIMEOUT_MS);
    expect(roundDeadline(0, MAX_POWER_OFF_TIMEOUT_MS)).toBe(
      MAX_POWER_OFF_TIMEOUT_MS + ROUND_RECORD_MARGIN_MS,
    );
  });

  it.each(["vanilla", "openshift"])(
    "overlay %s: fence consumes Kafka, no Trigger delivers to it",
    (overlay) => {
      const objects: KubeObject[] = render(join(KNATIVE_DIR, "overlays", overlay));
      const svc = objects.find(
        (o) =>
          o.kind === "Service" &&
          o.apiVersion.startsWith("serving.knative.dev") &&
          o.metadata.name === "fence",
      ) as unknown as Service | undefined;
      expect(svc).toBeDefined();
      expect(svc!.spec.template.spec.containers[0]!.args).toContain("--kafka");
      expect(svc!.spec.template.spec.containers[0]!.args).not.toContain("--http");
      const triggers = objects
        .filter((o) => o.kind === "Trigger")
        .map((o) => o as unknown as Trigger)
        .filter((t) => t.spec.subscriber.ref?.kind === "Service" && t.spec.subscriber.ref.name === "fence");
      expect(triggers.map((t) => t.metadata.name)).toEqual([]);
    },
  );
});
