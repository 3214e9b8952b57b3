// How long each environment took to start, for the test-time report (`make test`): a timed
// start (control plane, kwok nodes, Kafka cluster, pipeline cluster, lab, BMC emulator)
// appends one JSON line — its kind, duration and the test file it ran in — to the file
// named by FASTFENCE_ENV_TIMES, which the vitest reporter (harness/test-times/reporter.ts)
// sets for its run; child processes (`fastfence lab up`) inherit it. Without that variable
// (the lab, the benches and the CLI on their own) it records nothing. It must never change
// what a start does, returns or throws, and never make a start wait: one small synchronous
// append after the start has ended, and a failed append is ignored.
import { appendFileSync } from "node:fs";

/** The file (JSON lines) the records go to; set by the test-time reporter. */
export const ENV_TIMES_VAR = "FASTFENCE_ENV_TIMES";
/** The test file running in this process (set per file by harness/test-times/current-file.ts). */
export const TEST_FILE_VAR = "FASTFENCE_TEST_FILE";

export type EnvKind =
  | "control-plane"
  | "kwok"
  | "kafka"
  | "pipeline-cluster"
  | "lab"
  | "bmc-ipmi-sim"
  | "bmc-sushy"
  | "bmc-redfish-lab";

/** One line of the FASTFENCE_ENV_TIMES file. */
export interface EnvStartRecord {
  kind: EnvKind;
  /** What was started, e.g. "3 brokers", "controller-manager+scheduler". */
  detail: string;
  /** Wall time of the start, ms. */
  ms: number;
  /** False when the start threw. */
  ok: boolean;
  /** When the start began, epoch ms. */
  at: number;
  /** The test file (absolute path) the start ran for, when known. */
  file?: string;
  pid: number;
}

/** Runs `start` and, when a test run asked for it, records how long it took. */
export async function timedStart<T>(kind: EnvKind, detail: string, start: () => Promise<T>): Promise<T> {
  const out = process.env[ENV_TIMES_VAR];
  if (!out) return start();
  const at = Date.now();
  const t0 = performance.now();
  let ok = false;
  try {
    const value = await start();
    ok = true;
    return value;
  } finally {
    const file = process.env[TEST_FILE_VAR];
    const rec: EnvStartRecord = {
      kind,
      detail,
      ms: Math.round(performance.now() - t0),
      ok,
      at,
      ...(file ? { file } : {}),
      pid: process.pid,
    };
    try {
      appendFileSync(out, `${JSON.stringify(rec)}\n`);
    } catch {
      // The report loses one line; the start itself is unaffected.
    }
  }
}
