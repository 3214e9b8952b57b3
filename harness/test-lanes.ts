// Which integration files run in which lane of `make test-integration`: vitest.config.ts
// builds one vitest project per file group from this, and scripts/test-integration.ts runs
// each lane (one vitest invocation of its projects, one file at a time): the heavy lane and
// the light group's two shards side by side, then the lab lane alone. The heavy lane takes
// the files whose timed bounds or process counts a busy neighbour could break (pipeline
// clusters with timed rounds, Kafka brokers frozen or killed); the light group every other
// file (pipeline clusters that assert outcomes, not times, among them), split in two shards
// (vitest --shard: by a hash of the path, so a new file needs no entry) because alone it
// mostly waits — its files wait out timeouts, leases and emulated BMCs, and one light
// lane kept the two cores under half busy once the heavy lane had ended; each shard has
// its own shared API server and Kafka broker. The lab lane takes the labs (one per
// machine; a compact lab alone keeps both cores busy, and beside it the light lane's API
// servers stalled and its timed waits failed). Pure data: it must never start anything;
// every file is in exactly one group, every group in one lane or split across lanes as
// shards 1..n of one count (test/unit/harness/test-lanes.test.ts checks both against the tree).

/** An environment one vitest invocation starts once and its files share, reset between them. */
export type SharedEnv = "kafka" | "control-plane";

/** A vitest project of integration files. */
export interface FileGroup {
  /** The vitest project name (`vitest run --project <project>`). */
  project: string;
  /** Files relative to the checkout, each with why it is here; undefined: every file no other group takes. */
  files?: Record<string, string>;
  /** What its files share (a lab file shares nothing: a lab is its own cluster). */
  shared: SharedEnv[];
}

/** A vitest invocation of `make test-integration`: its projects' files one at a time. */
export interface Lane {
  name: string;
  projects: string[];
  /** Runs after the other lanes, with nothing beside it. */
  alone?: boolean;
  /** Only this shard of its projects' files (vitest `--shard=index/count`). */
  shard?: { index: number; count: number };
}

export const INTEGRATION_GLOB = "test/integration/**/*.test.ts";

/** Each file with why it is in the lab lane. */
const LAB: Record<string, string> = {
  "test/integration/lab-watchdog-fencing.test.ts": "two labs, watchdog timings",
  "test/integration/lab-look-after.test.ts": "a lab",
  "test/integration/lab-compact-plane.test.ts": "a lab, crashes a control-plane node",
  "test/integration/lab-cleanup.test.ts": "a lab, counts the machine's namespaces and links",
  "test/integration/lab-machine-claim.test.ts": "claims the machine (one lab per machine)",
  "test/integration/standalone-checkout.test.ts": "a lab in a checkout with nothing beside it",
};

/** Each file with why it is in the heavy lane. */
const HEAVY: Record<string, string> = {
  "test/integration/pipeline-planned-work.test.ts": "a pipeline cluster, timed holds",
  "test/integration/pipeline-liveness.test.ts": "four pipeline clusters, timed rounds",
  "test/integration/pipeline-flood.test.ts": "a pipeline cluster under a flood",
  "test/integration/pipeline-last-look.test.ts": "a pipeline cluster",
  "test/integration/pipeline-faults.test.ts": "a pipeline cluster, timed faults",
  "test/integration/bus-kafka-freeze.test.ts": "freezes brokers of a 3-broker cluster, timed",
  "test/integration/bus-kafka-idle-producer.test.ts": "3-broker clusters, broker faults",
  "test/integration/kafkajs-request-timeout.test.ts": "3-broker clusters, timed request faults",
  "test/integration/kafkajs-stop-frozen.test.ts": "a frozen broker, timed stop",
  "test/integration/kube-endpoint-failover.test.ts": "3-4 API servers, timed failover bound",
};

export const GROUPS: FileGroup[] = [
  { project: "integration-lab", files: LAB, shared: [] },
  { project: "integration-heavy", files: HEAVY, shared: ["kafka"] },
  { project: "integration", shared: ["kafka", "control-plane"] },
];

/** The lanes: those not `alone` at once, then each `alone` one by itself. A lab runs beside nothing. */
export const LANES: Lane[] = [
  { name: "heavy", projects: ["integration-heavy"] },
  { name: "light-1", projects: ["integration"], shard: { index: 1, count: 2 } },
  { name: "light-2", projects: ["integration"], shard: { index: 2, count: 2 } },
  { name: "lab", projects: ["integration-lab"], alone: true },
];

/** Every file some group names explicitly (the catch-all group excludes these). */
export function namedFiles(): string[] {
  return GROUPS.flatMap((g) => Object.keys(g.files ?? {}));
}
