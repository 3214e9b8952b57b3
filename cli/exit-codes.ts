// The exit codes of every `fastfence` command, in one place: commands return these,
// `fastfence --help` prints this table and docs/cli.md repeats it (a unit test keeps the
// two equal). Never renumber or reuse an entry: scripts, CI jobs and probes depend on them.
import { wrap } from "./output.ts";

export const EXIT = {
  /** The operation succeeded (run/source: stopped cleanly on SIGINT/SIGTERM). */
  ok: 0,
  /** The operation was attempted and failed. */
  failed: 1,
  /** The command line (or a setting it needs) is wrong; the operation was not attempted. */
  usage: 2,
  /** The object the command names (a node, an incident) does not exist; nothing was written. */
  notFound: 3,
  /** The command waited (--wait) and the outcome did not come in time; what it asked for stands. */
  timeout: 4,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES: readonly { code: ExitCode; meaning: string }[] = [
  { code: EXIT.ok, meaning: "ok (run, source: stopped cleanly on SIGINT/SIGTERM)" },
  {
    code: EXIT.failed,
    meaning:
      "the operation failed: BMC, Kafka or cluster error, lab or stack start-up failed, trace found no events",
  },
  {
    code: EXIT.usage,
    meaning:
      "usage error: unknown command or option, missing or invalid value, a required option (or its " +
      "FASTFENCE_* variable) not given; bmc --node: the cluster's settings for the node are missing or wrong",
  },
  {
    code: EXIT.notFound,
    meaning: "not found: the node (pause, resume, fence) does not exist; nothing was written",
  },
  {
    code: EXIT.timeout,
    meaning:
      "timed out: fence --wait saw no outcome within its time; the request stands and the stages go on with it",
  },
];

/** The table as `fastfence --help` prints it. */
export function exitCodesHelp(): string {
  return EXIT_CODES.map((e) => wrap(`  ${e.code}  ${e.meaning}`, 100, 5)).join("\n");
}
