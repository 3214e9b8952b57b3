// What the cluster says of its nodes' watchdogs, the rules (issue 18 item 5): the per-node
// watchdog timeout (a Node annotation the node's agent reads) and the FencingPolicy's
// `WatchdogsArmed` condition, summarised from the reports the agents write on their own
// heartbeat Leases (core/watchdog.ts WatchdogReport). Pure: no I/O, never reads a clock.
// It never decides that a node may be fenced: that is core/watchdog.ts watchdogVerdict.
import { parseWatchdogReport, WATCHDOG_TIMEOUT_MS } from "./watchdog.ts";

/**
 * On a Node: the watchdog timeout this node's device must have, ms. Where the device says
 * its timeout (sysfs) and it differs, the agent does not arm and reports why; where it
 * says nothing (a FIFO, the lab) this is the timeout it reports. Wins over
 * FASTFENCE_WATCHDOG_TIMEOUT_MS.
 */
export const NODE_TIMEOUT_ANNOTATION = "fastfence.io/watchdog-timeout-ms";

export type ParsedNodeTimeout = { ok: true; timeoutMs: number | undefined } | { ok: false; reason: string };

/** The Node annotation's value, if any; a clear reason for one that is not a valid timeout. */
export function parseNodeTimeout(value: string | undefined): ParsedNodeTimeout {
  if (value === undefined || value.trim() === "") return { ok: true, timeoutMs: undefined };
  const n = Number(value.trim());
  if (!Number.isInteger(n) || n < WATCHDOG_TIMEOUT_MS.min || n > WATCHDOG_TIMEOUT_MS.max)
    return {
      ok: false,
      reason: `${NODE_TIMEOUT_ANNOTATION}: expected an integer from ${WATCHDOG_TIMEOUT_MS.min} to ${WATCHDOG_TIMEOUT_MS.max} ms, got ${JSON.stringify(value.slice(0, 40))}`,
    };
  return { ok: true, timeoutMs: n };
}

export const WATCHDOGS_ARMED_CONDITION = "WatchdogsArmed";
/** Stable reasons of the `WatchdogsArmed` condition. */
export const WATCHDOGS_ARMED_REASONS = {
  armed: "AllReportedArmed",
  notArmed: "WatchdogNotArmed",
  none: "NoWatchdogReports",
} as const;

/** One node as the summary needs it. `report`: the raw annotation, undefined when absent. */
export interface NodeWatchdogInput {
  node: string;
  /** Only Ready nodes are held to account; a node that is down says more in its incident. */
  ready: boolean;
  report: string | undefined;
}

export interface WatchdogsArmedSummary {
  status: "True" | "False";
  reason: (typeof WATCHDOGS_ARMED_REASONS)[keyof typeof WATCHDOGS_ARMED_REASONS];
  message: string;
  /** Ready nodes whose report says not armed (or is absent or malformed while others report). */
  notArmed: { node: string; reason: string }[];
  /** Node → 1 armed, 0 not (every node with a report, and every listed one). */
  armed: Map<string, 0 | 1>;
}

/** A report saying the FencingPolicy asks for no watchdog on its node (requested: false). */
function notRequested(report: string | undefined): boolean {
  const p = parseWatchdogReport(report);
  return p.ok && p.report.requested === false;
}

/**
 * True when every Ready node reports its watchdog armed. False listing the Ready nodes
 * that do not (their reasons), or with NoWatchdogReports when no node reports a watchdog
 * the policy asks for (FASTFENCE_WATCHDOG_DEVICE unset everywhere, or no node entry with
 * a watchdog level): the watchdog level then fences nothing. A node whose report says the
 * policy gives it no watchdog level (requested: false) is not armed by choice: it counts 0
 * in the gauge and is not listed. Nodes are sorted, so every replica computes the same message.
 */
export function summariseWatchdogs(nodes: readonly NodeWatchdogInput[]): WatchdogsArmedSummary {
  const armed = new Map<string, 0 | 1>();
  const notArmed: { node: string; reason: string }[] = [];
  const anyReport = nodes.some((n) => n.report !== undefined && !notRequested(n.report));
  for (const n of [...nodes].sort((a, b) => a.node.localeCompare(b.node))) {
    if (notRequested(n.report)) {
      armed.set(n.node, 0);
      continue;
    }
    if (n.report === undefined && !anyReport) continue;
    const p = parseWatchdogReport(n.report);
    const ok = p.ok && p.report.armed;
    armed.set(n.node, ok ? 1 : 0);
    if (ok || !n.ready) continue;
    notArmed.push({
      node: n.node,
      reason: !p.ok ? p.reason : (p.report.reason ?? "not armed"),
    });
  }
  if (!anyReport)
    return {
      status: "False",
      reason: WATCHDOGS_ARMED_REASONS.none,
      message:
        "no node reports a watchdog the FencingPolicy asks for (no node entry with a watchdog level, or FASTFENCE_WATCHDOG_DEVICE unset on every event source): the watchdog level fences no node",
      notArmed,
      armed,
    };
  if (notArmed.length === 0)
    return {
      status: "True",
      reason: WATCHDOGS_ARMED_REASONS.armed,
      message: `every Ready node reports its watchdog armed (${[...armed.values()].filter((v) => v === 1).length} nodes)`,
      notArmed,
      armed,
    };
  const shown = notArmed.slice(0, 20).map((n) => `${n.node}: ${n.reason}`);
  const more = notArmed.length > shown.length ? `; and ${notArmed.length - shown.length} more` : "";
  return {
    status: "False",
    reason: WATCHDOGS_ARMED_REASONS.notArmed,
    message: `${notArmed.length} Ready node(s) without an armed watchdog, never fenced by the watchdog level: ${shown.join("; ")}${more}`,
    notArmed,
    armed,
  };
}
