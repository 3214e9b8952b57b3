// What the incident-webhook function says about each fastfence event it handles: one
// line of text for people (a chat webhook shows `text`) plus the fields a receiver needs to
// sort and de-duplicate (delivery is at least once: the same event `id` can arrive twice).
// The events are typed by the catalog of @fastfence/events, so a field renamed there
// fails this file's type check. Pure: no I/O, no clock.
import { EVENT_TYPES, type AnyFfEvent } from "@fastfence/events";

/** The event types this function summarises; trigger.yaml has one Trigger for each. */
export const HANDLED_TYPES = [
  EVENT_TYPES.fenceFailed,
  EVENT_TYPES.incidentBlocked,
  EVENT_TYPES.fenceObserved,
  EVENT_TYPES.workloadsReleased,
  EVENT_TYPES.nodeRecovered,
] as const;
export type HandledType = (typeof HANDLED_TYPES)[number];
export type HandledEvent = Extract<AnyFfEvent, { type: HandledType }>;

/** The JSON body posted to the webhook. */
export interface Summary {
  /** One line for people, e.g. "fastfence: worker-3 was powered off …". */
  text: string;
  severity: "info" | "warning" | "critical";
  type: HandledType;
  node: string;
  incident: string;
  /** The CloudEvent id: the same for a redelivered event, so receivers can drop repeats. */
  id: string;
  time: string;
}

/** Longest `text`, characters; a longer one is cut and ends with "…". */
export const MAX_TEXT = 500;

export function isHandled(ev: AnyFfEvent): ev is HandledEvent {
  return (HANDLED_TYPES as readonly string[]).includes(ev.type);
}

/** Free text from an event (a reason, a BMC message) on one line. */
function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

function describe(ev: HandledEvent): Pick<Summary, "text" | "severity"> {
  switch (ev.type) {
    case EVENT_TYPES.fenceFailed: {
      const d = ev.data;
      const what = `fencing ${d.node} failed in round ${d.round} (${d.code}): ${oneLine(d.reason)}`;
      return d.final
        ? {
            severity: "critical",
            text: `${what}. No more rounds: its workloads stay put until an operator acts.`,
          }
        : {
            severity: "warning",
            text: `${what}; fastfence retries${d.retryNotBefore ? ` after ${d.retryNotBefore}` : ""}.`,
          };
    }
    case EVENT_TYPES.incidentBlocked: {
      const d = ev.data;
      const limit = d.limit > 0 ? ` (${d.count} of ${d.limit})` : "";
      return {
        severity: "warning",
        text: `fencing ${d.node} is held by ${d.reason}${limit}: ${oneLine(d.message)}`,
      };
    }
    case EVENT_TYPES.fenceObserved: {
      const d = ev.data;
      return {
        severity: "info",
        text: `observe mode: fastfence would have powered ${d.node} off through ${d.driver} at ${d.address} (level ${d.level} of ${d.levels}); nothing was sent.`,
      };
    }
    case EVENT_TYPES.workloadsReleased: {
      const d = ev.data;
      return {
        severity: "warning",
        text: `${d.node} was powered off at ${d.powerOffConfirmedAt} and its workloads released: ${d.podsDeleted} pods, ${d.volumeAttachmentsDeleted} volume attachments and ${d.vmLaunchersDeleted} VM launcher pods deleted (KubeVirt restarts their VMs).`,
      };
    }
    case EVENT_TYPES.nodeRecovered: {
      const d = ev.data;
      return d.phase === "Recovered"
        ? {
            severity: "info",
            text: `${d.node} is back with a new boot ID; incident ${d.incident} is over${d.taintRemoved ? " and its out-of-service taint removed" : ""}.`,
          }
        : { severity: "info", text: `incident ${d.incident} on ${d.node} closed without fencing.` };
    }
    default: {
      const unhandled: never = ev;
      throw new TypeError(`no summary for ${(unhandled as AnyFfEvent).type}`);
    }
  }
}

/** The webhook body for one event. */
export function summarize(ev: HandledEvent): Summary {
  const { text, severity } = describe(ev);
  const line = `fastfence: ${text}`;
  return {
    text: line.length > MAX_TEXT ? `${line.slice(0, MAX_TEXT - 1)}…` : line,
    severity,
    type: ev.type,
    node: ev.data.node,
    incident: ev.data.incident,
    id: ev.id,
    time: ev.time,
  };
}
