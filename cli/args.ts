// Command-line parsing shared by every `fastfence` subcommand: node:util parseArgs in
// strict mode plus the flags every command takes (-h/--help, -o/--output), the deprecated
// `--json` alias, and typed usage errors (UsageError, exit code 2) that name the command
// and the offending flag. It never exits the process and prints nothing except the
// one-line deprecation warning on stderr.
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { FastfenceError } from "../core/errors.ts";
import { wrap } from "./output.ts";

export const OUTPUT_FORMATS = ["text", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** A wrong command line: unknown option, missing or invalid value, missing argument. */
export class UsageError extends FastfenceError {
  /** The command as typed after `fastfence`, e.g. "trace" or "lab up". */
  readonly command: string;
  constructor(command: string, message: string) {
    super("FF_INVALID_CONFIG", message);
    this.command = command;
  }
}

export interface CommandSpec<O extends ParseArgsOptionsConfig> {
  /** The command as typed after `fastfence` ("trace", "lab up"); names it in messages. */
  command: string;
  /** The command's own options; -h/--help and -o/--output are added. */
  options: O;
  /** At most this many positional arguments. */
  positionals: number;
  /** The -o values the command supports; the first is the default. */
  outputs: readonly OutputFormat[];
  /** Accept the old `--json` as a deprecated alias of `-o json` (removed in the next release). */
  legacyJson?: boolean;
}

type Values<O extends ParseArgsOptionsConfig> = {
  [K in keyof O]?: O[K]["type"] extends "string"
    ? O[K]["multiple"] extends true
      ? string[]
      : string
    : O[K]["multiple"] extends true
      ? boolean[]
      : boolean;
};

export interface ParsedCommand<O extends ParseArgsOptionsConfig> {
  values: Values<O>;
  positionals: string[];
  /** -o, or the command's default. */
  output: OutputFormat;
  /** Whether -o (or the deprecated --json) was given. */
  outputGiven: boolean;
  help: boolean;
}

/** Declares a command's options, keeping their literal types for `parseCommand`. */
export function defineCommand<const O extends ParseArgsOptionsConfig>(spec: CommandSpec<O>): CommandSpec<O> {
  return spec;
}

const COMMON = {
  help: { type: "boolean", short: "h" },
  output: { type: "string", short: "o" },
} as const;

/** The help line for -o, listing what the command supports. */
export function outputHelp(spec: CommandSpec<ParseArgsOptionsConfig>, what = ""): string {
  const line = `  -o, --output FORMAT     ${spec.outputs.join("|")} (default ${spec.outputs[0]})${what ? `: ${what}` : ""}`;
  return wrap(line, 100, 26);
}

/**
 * Parses `argv` (the arguments after the command) strictly. Throws UsageError for an
 * unknown option, an option without its value or with a value it does not take, too
 * many positionals, or an -o the command does not support.
 */
export function parseCommand<O extends ParseArgsOptionsConfig>(
  spec: CommandSpec<O>,
  argv: readonly string[],
): ParsedCommand<O> {
  const options: ParseArgsOptionsConfig = {
    ...spec.options,
    ...COMMON,
    ...(spec.legacyJson ? { json: { type: "boolean" } } : {}),
  };
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_"))
      throw new UsageError(spec.command, explain(options, argv) ?? (err as Error).message);
    throw err;
  }
  const { values, positionals } = parsed;
  if (values.help)
    return {
      values: values as Values<O>,
      positionals,
      output: spec.outputs[0]!,
      outputGiven: false,
      help: true,
    };
  if (positionals.length > spec.positionals)
    throw new UsageError(
      spec.command,
      spec.positionals === 0
        ? `takes no arguments, got "${positionals.join(" ")}"`
        : `unexpected argument "${positionals[spec.positionals]}"`,
    );
  let output = values.output as string | undefined;
  if (values.json) {
    if (output !== undefined && output !== "json")
      throw new UsageError(spec.command, `--json contradicts -o ${output}`);
    console.error(
      `fastfence ${spec.command}: --json is deprecated and will be removed in the next release; use -o json`,
    );
    output = "json";
  }
  if (output !== undefined && !(spec.outputs as readonly string[]).includes(output))
    throw new UsageError(
      spec.command,
      `-o/--output takes ${spec.outputs.join(", ")}${spec.outputs.length === 1 ? " only" : ""}, not "${output}"`,
    );
  return {
    values: values as Values<O>,
    positionals,
    output: (output as OutputFormat | undefined) ?? spec.outputs[0]!,
    outputGiven: output !== undefined,
    help: false,
  };
}

/** Names the first bad option in `argv`, from parseArgs' tokens (never from its messages). */
function explain(options: ParseArgsOptionsConfig, argv: readonly string[]): string | undefined {
  const { tokens } = parseArgs({
    args: [...argv],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  for (const t of tokens) {
    if (t.kind !== "option") continue;
    const def = options[t.name];
    if (!def) return `unknown option ${t.rawName}`;
    if (def.type === "boolean" && t.value !== undefined) return `${t.rawName} takes no value`;
    if (def.type === "string" && t.value === undefined) return `${t.rawName} needs a value`;
    if (def.type === "string" && !t.inlineValue && t.value?.startsWith("-"))
      return `${t.rawName} needs a value, got the option "${t.value}" (write ${t.rawName}=${t.value} if that is the value)`;
  }
  return undefined;
}

/** A TCP port from an option value (0 = any free port); undefined when the option was not given. */
export function parsePort(command: string, option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!(value.trim() !== "" && Number.isInteger(port) && port >= 0 && port < 65536))
    throw new UsageError(command, `${option} needs a port number 0-65535, not "${value}"`);
  return port;
}

/** A value from a fixed list, or a UsageError naming the option and the choices. */
export function parseChoice<const C extends string>(
  command: string,
  option: string,
  value: string,
  choices: readonly C[],
): C {
  if (!(choices as readonly string[]).includes(value))
    throw new UsageError(command, `${option} takes ${choices.join(", ")}, not "${value}"`);
  return value as C;
}

/**
 * The options given before the command (`fastfence --context X pause NODE`, as kubectl
 * passes them to a plugin): the leading words that are string options of `options`, each
 * as `--name=value` so the command parses them like its own, and the words from the first
 * one that is not (the command, or an option the caller refuses). UsageError (command "")
 * for such an option without its value.
 */
export function leadingOptions(
  argv: readonly string[],
  options: ParseArgsOptionsConfig,
): { given: string[]; rest: string[] } {
  const given: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const w = argv[i]!;
    if (!w.startsWith("-") || w === "-" || w === "--") break;
    const eq = w.indexOf("=");
    const name = w.startsWith("--")
      ? w.slice(2, eq < 0 ? undefined : eq)
      : Object.keys(options).find((k) => options[k]!.short === w[1]);
    if (!name || !Object.hasOwn(options, name) || options[name]!.type !== "string") break;
    const typed = w.startsWith("--") ? `--${name}` : w.slice(0, 2);
    let value = w.startsWith("--") ? (eq < 0 ? undefined : w.slice(eq + 1)) : w.slice(2) || undefined;
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined || value.startsWith("-"))
        throw new UsageError(
          "",
          value === undefined
            ? `${typed} needs a value`
            : `${typed} needs a value, got the option "${value}" (write ${typed}=${value} if that is the value)`,
        );
      i++;
    }
    given.push(`--${name}=${value}`);
  }
  return { given, rest: argv.slice(i) };
}
