// Test helpers for the `fastfence` command line: runs it as a child process (`cli`) or
// in this process through cli/main.ts's `main` (`fastfence`, with stdout/stderr captured),
// and lists every command's option specs, so a new command without an entry here fails
// the tests. Both runners drop FASTFENCE_* and KUBECONFIG from the environment and set only
// those a test passes: unit tests use commands that fail at parsing or work offline, an
// integration test passes the KUBECONFIG of its own API server. Never starts anything
// that outlives the call.
import { spawnSync } from "node:child_process";
import { vi } from "vitest";
import { fileURLToPath } from "node:url";
import type { ParseArgsOptionsConfig } from "node:util";
import type { CommandSpec } from "../../../cli/args.ts";
import { BMC_ARGS } from "../../../cli/bmc.ts";
import { EVENTS_ARGS } from "../../../cli/events.ts";
import { LAB_ARGS } from "../../../cli/lab.ts";
import { main, VERSION_ARGS } from "../../../cli/main.ts";
import { RUN_ARGS } from "../../../cli/run.ts";
import { SOURCE_ARGS } from "../../../cli/source.ts";
import { STACK_CHECK_ARGS } from "../../../cli/stack-check.ts";
import { RELEASE_SLOT_ARGS } from "../../../cli/release-slot.ts";
import { FENCE_ARGS } from "../../../cli/fence.ts";
import { PAUSE_ARGS, RESUME_ARGS } from "../../../cli/pause.ts";
import { TRACE_ARGS } from "../../../cli/trace.ts";
import { COMPLETION_ARGS } from "../../../cli/specs.ts";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

const isSetting = (k: string) => k.startsWith("FASTFENCE_") || k === "KUBECONFIG";

/** `fastfence <args>` in a child process, without Kafka/BMC/kube settings from this environment. */
export function cli(args: readonly string[], env: Record<string, string> = {}): CliResult {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !isSetting(k) && k !== "NODE_OPTIONS"),
  );
  const r = spawnSync(
    process.execPath,
    [
      "--disable-warning=ExperimentalWarning",
      "--disable-warning=TimeoutNegativeWarning",
      `${ROOT}cli/main.ts`,
      ...args,
    ],
    { cwd: ROOT, encoding: "utf8", timeout: 30_000, env: { ...clean, ...env } },
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `fastfence <args>` in this process: cli/main.ts's `main`, its console output captured. */
export async function fastfence(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  const saved = { ...process.env };
  for (const k of Object.keys(process.env)) if (isSetting(k)) delete process.env[k];
  Object.assign(process.env, env);
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  const error = vi
    .spyOn(console, "error")
    .mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  try {
    const status = await main([...args]);
    return { status, stdout: out.map((l) => `${l}\n`).join(""), stderr: err.map((l) => `${l}\n`).join("") };
  } finally {
    log.mockRestore();
    error.mockRestore();
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

interface CommandCase {
  /** Words after `fastfence` up to the options, e.g. ["lab", "crash", "node-a"]. */
  words: string[];
  spec: CommandSpec<ParseArgsOptionsConfig>;
}

const labWords: Record<string, string[]> = {
  up: [],
  down: [],
  status: [],
};

/**
 * Every command (and lab subcommand) with a valid command line minus its options; the
 * keys are the commands of cli/main.ts.
 */
export const COMMAND_CASES: Record<string, CommandCase[]> = {
  run: [{ words: ["run", "detect"], spec: RUN_ARGS }],
  source: [{ words: ["source"], spec: SOURCE_ARGS }],
  events: [{ words: ["events", "catalog"], spec: EVENTS_ARGS }],
  trace: [{ words: ["trace", "node-a"], spec: TRACE_ARGS }],
  bmc: [{ words: ["bmc", "status"], spec: BMC_ARGS }],
  lab: Object.entries(LAB_ARGS).map(([sub, spec]) => ({
    words: ["lab", sub, ...(labWords[sub] ?? ["node-a"])],
    spec,
  })),
  pause: [
    { words: ["pause"], spec: PAUSE_ARGS },
    { words: ["pause", "node-a"], spec: PAUSE_ARGS },
  ],
  resume: [
    { words: ["resume"], spec: RESUME_ARGS },
    { words: ["resume", "node-a"], spec: RESUME_ARGS },
  ],
  fence: [{ words: ["fence", "node-a"], spec: FENCE_ARGS }],
  "release-slot": [{ words: ["release-slot", "node-a-12345678"], spec: RELEASE_SLOT_ARGS }],
  "stack-check": [{ words: ["stack-check"], spec: STACK_CHECK_ARGS }],
  completion: [{ words: ["completion", "bash"], spec: COMPLETION_ARGS }],
  version: [{ words: ["version"], spec: VERSION_ARGS }],
};
