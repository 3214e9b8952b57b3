// The bench report's section for the compact control plane (bench/lab.ts): released and
// replacement-Running percentiles per victim role (which control-plane leaderships the
// crashed node held), and per trial the roles, the etcd elections and the API errors a new
// client met. Pure: builds text and a summary from trial results; never touches the lab.
import { percentiles, type Percentiles } from "./bench-chart.ts";
import type { TrialResult } from "./trial.ts";
import { roleClass } from "./victim-roles.ts";
import { COMPACT_SETTINGS } from "./compact-plane.ts";
import type { ControlPlaneMode, LeaderElectionProfile } from "./types.ts";

export interface RoleRow {
  role: string;
  trials: number;
  kraftController: number;
  releasedMs: Percentiles;
  replacementRunningMs: Percentiles;
}

export function roleRows(rs: readonly TrialResult[]): RoleRow[] {
  const by = new Map<string, TrialResult[]>();
  for (const r of rs) if (r.roles) by.set(roleClass(r.roles), [...(by.get(roleClass(r.roles)) ?? []), r]);
  const all: [string, TrialResult[]][] = [...by, ["every trial", rs.filter((r) => r.roles)]];
  return all.map(([role, xs]) => ({
    role,
    trials: xs.length,
    kraftController: xs.filter((r) => r.roles!.kraftController).length,
    releasedMs: percentiles(xs.map((r) => r.releasedMs)),
    replacementRunningMs: percentiles(xs.map((r) => r.replacementRunningMs)),
  }));
}

/** One trial's roles, elections and API errors, for its bench line and the report. */
export function trialRoleText(r: TrialResult): string {
  const parts: string[] = [];
  if (r.roles)
    parts.push(
      `${roleClass(r.roles)}${r.roles.vmController ? " + VM controller" : ""}${r.roles.kraftController ? " + KRaft controller" : ""}`,
    );
  if (r.etcdElections !== undefined) parts.push(`etcd elections ${r.etcdElections}`);
  if (r.apiErrors)
    parts.push(
      `API errors ${r.apiErrors.failed}/${r.apiErrors.requests} (longest ${r.apiErrors.longestOutageMs} ms)`,
    );
  return parts.join("; ");
}

const cell = (p: Percentiles) => `${p.p50 ?? "-"} | ${p.p95 ?? "-"} | ${p.p99 ?? "-"}`;

/** The section: the settings, a table per victim role, then every trial. */
export function rolesSection(
  rs: readonly TrialResult[],
  settings: string,
): { lines: string[]; rows: RoleRow[] } {
  const rows = roleRows(rs);
  const lines = [
    "### By the victim's control-plane role",
    "",
    settings,
    "",
    "| victim held | trials | of them KRaft controller | released p50 | p95 | p99 | replacement Running p50 | p95 | p99 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...rows.map(
      (x) =>
        `| ${x.role} | ${x.trials} | ${x.kraftController} | ${cell(x.releasedMs)} | ${cell(x.replacementRunningMs)} |`,
    ),
    "",
    "Per trial (victim: roles held just before the trial; etcd elections from then to the trial's end; a new client's API requests, one every 250 ms through the lab's API endpoint, that failed from the fault to the release):",
    "",
    ...rs.map(
      (r) =>
        `- #${r.trial} ${r.node}: ${trialRoleText(r)}; released ${r.releasedMs ?? "-"} ms, replacement ${r.replacementRunningMs ?? "-"} ms`,
    ),
    "",
  ];
  return { lines, rows };
}

/** The control plane a bench ran on and its settings, for the report (sources: docs/lab.md). */
export function planeText(plane: ControlPlaneMode, profile: LeaderElectionProfile): string {
  if (plane === "host")
    return "Control plane: on the host (one etcd, API server, controller manager and scheduler outside every node; they never die with a node).";
  const c = COMPACT_SETTINGS[profile];
  const le = (x: { leaseS: number; renewS: number; retryS: number }) =>
    `Lease ${x.leaseS} s, renew deadline ${x.renewS} s, retry ${x.retryS} s`;
  return (
    `Control plane: compact, ${profile} settings (docs/lab.md, "The compact control plane"): on each node an etcd member ` +
    `(heartbeat ${c.etcd.heartbeatMs} ms, election ${c.etcd.electionMs} ms), an API server, a controller manager ` +
    `(${le(c.controllerManager)}${c.controllerManager.nodeMonitorGraceS ? `, node-monitor grace ${c.controllerManager.nodeMonitorGraceS} s` : ""}) ` +
    `and a scheduler (${le(c.scheduler)}), leader-elected.`
  );
}
