// A NodeFence status and a workloads.released event written by an earlier build (its release
// deleted VMIs and counted them as vmisDeleted) still parse: nothing stored is dropped, and
// the launcher count reads 0. Plain data.
import { describe, expect, it } from "vitest";
import { NodeFenceStatusSchema } from "../../../core/incident.ts";
import { WorkloadsReleasedSchema } from "../../../events/schemas.ts";

const earlier = {
  taint: "node.kubernetes.io/out-of-service",
  podsDeleted: 3,
  volumeAttachmentsDeleted: 1,
  vmisDeleted: 2,
};

describe("release counts of an earlier build", () => {
  it("a stored status keeps vmisDeleted and reads vmLaunchersDeleted 0", () => {
    const s = NodeFenceStatusSchema.parse({ phase: "Released", released: earlier });
    expect(s.released).toEqual({ ...earlier, vmLaunchersDeleted: 0 });
  });

  it("an earlier workloads.released event still parses", () => {
    const e = WorkloadsReleasedSchema.parse({
      incident: "node-a-1a2b3c4d",
      node: "node-a",
      bootId: "1a2b3c4d-0000-4000-8000-000000000000",
      ...earlier,
      powerOffConfirmedAt: "2026-12-06T10:00:00.000Z",
      releasedAt: "2026-12-06T10:00:01.000Z",
    });
    expect(e.vmLaunchersDeleted).toBe(0);
    expect(e.vmisDeleted).toBe(2);
  });

  it("a count below zero is still refused", () => {
    expect(() =>
      NodeFenceStatusSchema.parse({ phase: "Released", released: { ...earlier, vmLaunchersDeleted: -1 } }),
    ).toThrow();
  });
});
