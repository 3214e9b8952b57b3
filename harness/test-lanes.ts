// Which integration files run in which lane of `make test-integration` (vitest.config.ts
// builds one vitest project per lane from this; scripts/test-integration.ts runs the lanes).
// Within a lane files run one at a time. The lab lane runs alone, after the two others:
// a lab keeps both cores busy and its fault bounds are timed. The heavy lane holds the
// files that start many processes or time a fault (pipeline clusters, Kafka brokers
// frozen or killed, process counts of the whole machine); the light lane (every other
// file) runs beside it. Pure data: it must never start anything, and a file belongs to
// exactly one lane (test/unit/harness/test-lanes.test.ts checks both against the tree).

/** A vitest project of the integration files, and the files it takes. */
export interface Lane {
  name: "lab" | "heavy" | "light";
  /** The vitest project name (`vitest run --project <project>`). */
  project: string;
  /** Files relative to the checkout; undefined: every integration file no other lane takes. */
  files?: Record<string, string>;
}

export const INTEGRATION_GLOB = "test/integration/**/*.test.ts";

/** Each file with why it is in the lab lane. */
const LAB: Record<string, string> = {
  "test/integration/lab-watchdog-fencing.test.ts": "two labs, watchdog timings",
  "test/integration/lab-look-after.test.ts": "a lab",
  "test/integration/lab-cleanup.test.ts": "two labs, counts the machine's namespaces and links",
  "test/integration/lab-machine-claim.test.ts": "claims the machine (one lab per machine)",
};

/** Each file with why it is in the heavy lane. */
const HEAVY: Record<string, string> = {
  "test/integration/pipeline-planned-work.test.ts": "a pipeline cluster, timed holds",
  "test/integration/pipeline-liveness.test.ts": "four pipeline clusters, timed rounds",
  "test/integration/pipeline-flood.test.ts": "a pipeline cluster under a flood",
  "test/integration/pipeline-last-look.test.ts": "a pipeline cluster",
  "test/integration/pipeline-faults.test.ts": "a pipeline cluster, timed faults",
  "test/integration/pipeline-crash.test.ts": "a pipeline cluster",
  "test/integration/replayed-fence-request.test.ts": "a pipeline cluster",
  "test/integration/forged-evidence.test.ts": "a pipeline cluster",
  "test/integration/tracing-otlp.test.ts": "a pipeline cluster",
  "test/integration/bus-kafka-freeze.test.ts": "freezes brokers of a 3-broker cluster, timed",
  "test/integration/bus-kafka-idle-producer.test.ts": "3-broker clusters, broker faults",
  "test/integration/kafkajs-request-timeout.test.ts": "3-broker clusters, timed request faults",
  "test/integration/kafkajs-stop-frozen.test.ts": "a frozen broker, timed stop",
  "test/integration/env-cleanup.test.ts": "checks no harness process of the machine outlives its owner",
  "test/integration/standalone-checkout.test.ts": "clones and sets up a checkout",
};

export const LANES: Lane[] = [
  { name: "heavy", project: "integration-heavy", files: HEAVY },
  { name: "light", project: "integration" },
  { name: "lab", project: "integration-lab", files: LAB },
];

/** Lanes that run at once, then the next group: [[heavy, light], [lab]]. */
export const LANE_GROUPS: Lane["name"][][] = [["heavy", "light"], ["lab"]];

/** Every file some lane names explicitly (the light lane excludes these). */
export function namedFiles(): string[] {
  return LANES.flatMap((l) => Object.keys(l.files ?? {}));
}
