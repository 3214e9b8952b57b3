// Real fastfence events for the tests, built the way fastfence builds them: `envelope` of
// @fastfence/events (id, time, source "/fastfence/<emitter>/<replica>", traceparent,
// ffincident) around data typed by the catalog, from the component the catalog says
// emits the type. `sent` turns one into the HTTP request Knative's dispatcher sends
// (binary mode, its default, or structured mode) with the cloudevents SDK.
import { CloudEvent, HTTP } from "cloudevents";
import { CATALOG, EVENT_TYPES, envelope, type DataOf, type EventType, type FfEvent } from "@fastfence/events";
import type { HandledType } from "../src/summary.ts";

export const NODE = "worker-3";
export const BOOT_ID = "5f1c2a9e-0b7d-4c1e-9a55-0d6f3e2b8c41";
export const INCIDENT = "worker-3-5f1c2a9e";
const AT = "2026-11-30T10:00:00.000Z";

/** An event of `type` about NODE, as the catalog's emitter of that type would publish it. */
export function catalogEvent<T extends EventType>(
  type: T,
  data: DataOf<T>,
  subject = NODE,
): FfEvent<DataOf<T>> {
  const emitter = CATALOG[type].emittedBy[0];
  return envelope(
    { type, subject, ffincident: INCIDENT, data },
    `/fastfence/${emitter}/${emitter}-7d9f-x2k`,
    Date.parse(AT),
  );
}

const incident = { incident: INCIDENT, node: NODE, bootId: BOOT_ID };

/** One event of every type the function handles. */
export const HANDLED_EVENTS: { [T in HandledType]: FfEvent<DataOf<T>> } = {
  [EVENT_TYPES.fenceFailed]: catalogEvent(EVENT_TYPES.fenceFailed, {
    ...incident,
    round: 2,
    reason: "every level failed:\nBMC 10.0.8.3 unreachable",
    code: "FF_BMC_UNREACHABLE",
    attempts: [
      {
        round: 2,
        level: 0,
        driver: "redfish",
        by: "fence-7d9f-x2k",
        startedAt: "2026-11-30T09:59:50.000Z",
        finishedAt: "2026-11-30T09:59:58.000Z",
        result: "unreachable",
        errorCode: "FF_BMC_UNREACHABLE",
      },
    ],
    final: false,
    retryNotBefore: "2026-11-30T10:00:30.000Z",
  }),
  [EVENT_TYPES.incidentBlocked]: catalogEvent(EVENT_TYPES.incidentBlocked, {
    ...incident,
    reason: "StormGuard",
    message: "3 nodes fenced in the last 10 minutes",
    count: 3,
    limit: 2,
  }),
  [EVENT_TYPES.fenceObserved]: catalogEvent(EVENT_TYPES.fenceObserved, {
    ...incident,
    round: 1,
    level: 1,
    levels: 2,
    driver: "ipmi",
    address: "10.0.8.3:623",
    message: "observe mode: no power command sent",
  }),
  [EVENT_TYPES.workloadsReleased]: catalogEvent(EVENT_TYPES.workloadsReleased, {
    ...incident,
    taint: "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
    podsDeleted: 14,
    volumeAttachmentsDeleted: 3,
    vmLaunchersDeleted: 1,
    powerOffConfirmedAt: "2026-11-30T09:59:41.000Z",
    releasedAt: "2026-11-30T09:59:42.000Z",
  }),
  [EVENT_TYPES.nodeRecovered]: catalogEvent(EVENT_TYPES.nodeRecovered, {
    incident: INCIDENT,
    node: NODE,
    previousBootId: BOOT_ID,
    bootId: "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d",
    phase: "Recovered",
    taintRemoved: true,
    at: "2026-11-30T10:07:12.000Z",
  }),
};

/** A valid fastfence event the function does not subscribe to. */
export const UNHANDLED_EVENT = catalogEvent(EVENT_TYPES.fenceRequested, {
  ...incident,
  confirmedAt: "2026-11-30T09:59:30.000Z",
  observers: ["source-worker-1", "source-worker-2"],
});

export type Mode = "binary" | "structured";

/** The HTTP request that delivers `ev` (a full event, or any attributes for bad input). */
export function sent(
  ev: FfEvent | Record<string, unknown>,
  mode: Mode,
): { headers: Record<string, string>; body: string } {
  // strict=false: bad input must reach the function as it is, not be refused by the SDK here.
  const ce = new CloudEvent<unknown>(ev as ConstructorParameters<typeof CloudEvent>[0], false);
  const msg = mode === "binary" ? HTTP.binary(ce) : HTTP.structured(ce);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(msg.headers)) if (v !== undefined) headers[k] = String(v);
  return { headers, body: typeof msg.body === "string" ? msg.body : JSON.stringify(msg.body) };
}
