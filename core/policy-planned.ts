// The FencingPolicy's settings for planned work and its mode (spec.plannedWork, spec.mode),
// kept beside core/policy.ts, which composes them into the spec schema. Each field with its
// unit, default and trade-off. Declarations only: no I/O.
import { z } from "zod";

/**
 * Planned work that is not failure (docs/operations.md): states read from the API, never
 * from an event, under which a node that looks dead is not fenced. Its incident is
 * Blocked with the state as its reason (core/planned.ts), and it is fenced as soon as the
 * state ends or, for a planned reboot, once that reboot outlasts maxPlannedRebootMs.
 */
export const PlannedWorkSettingsSchema = z
  .object({
    // Honour a medik8s NodeMaintenance for the node: not fenced while one exists, with no
    // time bound (an administrator took the node out on purpose and may keep it off for
    // hours). Default true. Off: a node under maintenance that looks dead is fenced.
    nodeMaintenance: z.boolean().default(true),
    // Honour a MachineConfig update: a cordoned node whose machine-config daemon is
    // applying a new config (state Working or Degraded, desiredConfig ≠ currentConfig, or a
    // drain requested by the MCO) reboots on purpose. Default true. Bounded by
    // maxPlannedRebootMs.
    machineConfig: z.boolean().default(true),
    // Hold every node while an OpenShift cluster upgrade runs (ClusterVersion "version"
    // Progressing=True), like NodeHealthCheck does. Default true. Bounded by
    // maxPlannedRebootMs per incident, so a node that really dies during a two-hour
    // upgrade is still fenced.
    clusterUpgrade: z.boolean().default(true),
    // How long a planned reboot (machineConfig, clusterUpgrade) may keep a silent node
    // unfenced, counted from its incident's first suspicion; past it the node is treated
    // as failed and fenced. Unit: ms. Default 600000 (10 min: an OpenShift node reboot
    // takes 1-5 min). Longer never fences a slow reboot; shorter brings back a node's
    // workloads sooner when the reboot really failed.
    maxPlannedRebootMs: z.int().min(0).max(86_400_000).default(600_000),
  })
  .prefault({});

/** Enforce: fence. Observe: run everything but the power command, recording what it would do. */
export const POLICY_MODES = ["Enforce", "Observe"] as const;
export type PolicyMode = (typeof POLICY_MODES)[number];
