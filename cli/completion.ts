// Shell completion for `fastfence` and `kubectl fastfence`: `fastfence completion bash|zsh`
// prints a script that asks `fastfence __complete WORDS... CURRENT` on every TAB, and
// `__complete` answers in the protocol of Cobra (kubectl, oc, helm): one candidate per line,
// then `:<directive>` (4: no file completion; 0: let the shell complete file names). kubectl
// >= 1.26 runs bin/kubectl_complete-fastfence, which calls the same `__complete`. Every
// candidate comes from the commands' own definitions (cli/specs.ts, and the specs beside
// run, source, lab and stack-check), so completion cannot drift from what the parsers
// accept. It reads at most the kubeconfig files (for --context names), never contacts a
// cluster, never runs a command and never prints anything but candidates.
import { readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { homedir } from "node:os";
import type { ParseArgsOptionsConfig } from "node:util";
import { outputHelp, parseCommand, UsageError, type CommandSpec } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { render } from "./output.ts";
import {
  BMC_ACTIONS,
  BMC_ARGS,
  COMPLETION_ARGS,
  COMPLETION_SHELLS,
  EVENT_DOCUMENTS,
  EVENTS_ARGS,
  EVENTS_SUBCOMMANDS,
  FENCE_ARGS,
  KUBE_TARGET_OPTIONS,
  PAUSE_ARGS,
  RELEASE_SLOT_ARGS,
  RESUME_ARGS,
  TRACE_ARGS,
  VERSION_ARGS,
} from "./specs.ts";

type AnySpec = CommandSpec<ParseArgsOptionsConfig>;

/** One command's command line: its spec, or its subcommands' (lab); the words its first positional takes. */
export interface CommandLine {
  spec?: AnySpec;
  subcommands?: Readonly<Record<string, AnySpec>>;
  /** Candidates for the first positional (loaded only when asked: run's function names). */
  words?: () => Promise<readonly string[]>;
  /** The values an option takes where they are a fixed list (-o's come from the spec). */
  values?: Readonly<Record<string, readonly string[]>>;
}

const fixed = (w: readonly string[]) => () => Promise.resolve(w);

/** Every command of `fastfence` by name: the keys of cli/main.ts's COMMANDS (a unit test checks). */
export async function commandLines(): Promise<Record<string, CommandLine>> {
  const [run, source, lab, stackCheck] = await Promise.all([
    import("./run.ts"),
    import("./source.ts"),
    import("./lab.ts"),
    import("./stack-check.ts"),
  ]);
  return {
    run: {
      spec: run.RUN_ARGS,
      words: async () => (await import("../functions/registry.ts")).STAGES.map((s) => s.name),
    },
    source: { spec: source.SOURCE_ARGS },
    events: { spec: EVENTS_ARGS, words: fixed(EVENTS_SUBCOMMANDS), values: { format: EVENT_DOCUMENTS } },
    trace: { spec: TRACE_ARGS },
    bmc: { spec: BMC_ARGS, words: fixed(BMC_ACTIONS) },
    lab: { subcommands: lab.LAB_ARGS, values: lab.LAB_OPTION_VALUES },
    pause: { spec: PAUSE_ARGS },
    resume: { spec: RESUME_ARGS },
    fence: { spec: FENCE_ARGS },
    "release-slot": { spec: RELEASE_SLOT_ARGS },
    "stack-check": { spec: stackCheck.STACK_CHECK_ARGS },
    completion: { spec: COMPLETION_ARGS, words: fixed(COMPLETION_SHELLS) },
    version: { spec: VERSION_ARGS },
  };
}

/** Cobra's ShellCompDirective values that are used here. */
export const DIRECTIVE = { default: 0, noFileComp: 4 } as const;

export interface Completion {
  candidates: string[];
  directive: number;
}

/** Options whose value is a file name: the shell completes those. */
const FILE_OPTIONS = new Set(["kubeconfig", "ca", "credentials-file"]);
const COMMON = { help: { type: "boolean", short: "h" }, output: { type: "string", short: "o" } } as const;

function optionsOf(spec: AnySpec): ParseArgsOptionsConfig {
  return { ...spec.options, ...COMMON }; // the deprecated --json is not offered
}

/** The option a word names (`--context`, `-n`), or undefined. */
function optionNamed(options: ParseArgsOptionsConfig, word: string): string | undefined {
  if (word.startsWith("--")) return Object.hasOwn(options, word.slice(2)) ? word.slice(2) : undefined;
  if (/^-[^-]$/.test(word)) return Object.keys(options).find((k) => options[k]!.short === word[1]);
  return undefined;
}

/** Context names of the kubeconfig the words (or $KUBECONFIG, ~/.kube/config) name; none when unreadable. */
async function contextNames(kubeconfig: string | undefined, env: NodeJS.ProcessEnv): Promise<string[]> {
  const { load } = await import("js-yaml");
  const files = kubeconfig
    ? [kubeconfig]
    : env.KUBECONFIG
      ? env.KUBECONFIG.split(delimiter).filter(Boolean)
      : [join(homedir(), ".kube", "config")];
  const names: string[] = [];
  for (const f of files) {
    try {
      const doc = load(readFileSync(f, "utf8")) as { contexts?: { name?: unknown }[] } | null;
      for (const c of doc?.contexts ?? []) if (typeof c.name === "string") names.push(c.name);
    } catch {
      // an unreadable kubeconfig offers no names; the command itself says what is wrong
    }
  }
  return names;
}

/**
 * The candidates for the last of `words` (the words after `fastfence`; the last is the one
 * being completed, "" for a new word). Pure but for reading kubeconfig files for --context.
 */
export async function complete(
  lines: Record<string, CommandLine>,
  words: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Completion> {
  const done = words.slice(0, -1);
  const cur = words.at(-1) ?? "";
  const globalOptions: ParseArgsOptionsConfig = { ...KUBE_TARGET_OPTIONS, help: COMMON.help };
  let command: string | undefined;
  let line: CommandLine | undefined;
  let spec: AnySpec | undefined;
  let options = globalOptions;
  let positionals = 0;
  let pending: string | undefined; // an option whose value is the next word
  let kubeconfig: string | undefined;
  for (const w of done) {
    if (pending) {
      if (pending === "kubeconfig") kubeconfig = w;
      pending = undefined;
      continue;
    }
    if (w.startsWith("-") && w !== "-") {
      const eq = w.indexOf("=");
      const name = optionNamed(options, eq > 0 ? w.slice(0, eq) : w);
      if (name === "kubeconfig" && eq > 0) kubeconfig = w.slice(eq + 1);
      if (name && options[name]!.type === "string" && eq < 0) pending = name;
      continue;
    }
    if (command === undefined) {
      if (w === "help") continue;
      command = w;
      line = Object.hasOwn(lines, w) ? lines[w] : undefined;
      if (!line) return { candidates: [], directive: DIRECTIVE.noFileComp };
      spec = line.spec;
      if (spec) options = optionsOf(spec);
      continue;
    }
    if (line?.subcommands && !spec) {
      spec = Object.hasOwn(line.subcommands, w) ? line.subcommands[w] : undefined;
      if (!spec) return { candidates: [], directive: DIRECTIVE.noFileComp };
      options = optionsOf(spec);
      continue;
    }
    positionals++;
  }
  const out = (all: readonly string[], directive: number = DIRECTIVE.noFileComp): Completion => ({
    candidates: all.filter((c) => c.startsWith(cur)),
    directive,
  });
  if (pending) {
    if (FILE_OPTIONS.has(pending)) return { candidates: [], directive: DIRECTIVE.default };
    if (pending === "output") return out(spec?.outputs ?? []);
    if (pending === "context") return out(await contextNames(kubeconfig, env));
    return out(line?.values?.[pending] ?? []);
  }
  if (cur.startsWith("-")) {
    if (cur.includes("=")) return out([]);
    const names = Object.entries(options).flatMap(([k, o]) => [
      ...(o.short ? [`-${o.short}`] : []),
      `--${k}`,
    ]);
    return out(cur.startsWith("--") ? names.filter((n) => n.startsWith("--")) : names);
  }
  if (command === undefined) return out([...Object.keys(lines), "help"]);
  if (line?.subcommands && !spec) return out(Object.keys(line.subcommands));
  if (positionals === 0 && line?.words) return out(await line.words());
  return out([]);
}

/** `fastfence __complete WORDS...`: the candidates, one a line, then `:<directive>`. */
export async function completeCommand(argv: string[]): Promise<number> {
  const c = await complete(await commandLines(), argv.length ? argv : [""]);
  console.log([...c.candidates, `:${c.directive}`].join("\n"));
  return EXIT.ok;
}

const BASH = `# bash completion for fastfence: source <(fastfence completion bash)
# Each TAB asks "fastfence __complete WORDS... CURRENT" for the candidates (generated from
# the commands' definitions) and a last line ":<directive>" (4: no file names).
_fastfence() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} out directive
  COMPREPLY=()
  # --option=value is completed as "--option value" only
  [[ $cur == *=* || $cur == "=" || $prev == "=" ]] && return 0
  out=$("\${COMP_WORDS[0]}" __complete "\${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null) || return 0
  directive=\${out##*:}
  out=\${out%:*}
  local IFS=$'\\n'
  COMPREPLY=($(compgen -W "$out" -- "$cur"))
  if [[ \${#COMPREPLY[@]} -eq 0 ]] && (( (directive & 4) == 0 )); then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
complete -F _fastfence fastfence
`;

const ZSH = `#compdef fastfence
# zsh completion for fastfence: source <(fastfence completion zsh), or save it as _fastfence
# in a directory of $fpath. Each TAB asks "fastfence __complete WORDS... CURRENT" for the
# candidates (generated from the commands' definitions) and a last line ":<directive>".
_fastfence() {
  local out directive
  local -a lines cands
  out=$("\${words[1]}" __complete "\${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
  lines=("\${(@f)out}")
  directive=\${lines[-1]#:}
  cands=("\${(@)lines[1,-2]}")
  if (( \${#cands} )); then
    compadd -- "\${cands[@]}"
  elif (( (directive & 4) == 0 )); then
    _files
  fi
}
if [[ "$funcstack[1]" = "_fastfence" ]]; then
  _fastfence "$@"
else
  compdef _fastfence fastfence
fi
`;

/** The completion script for `shell`. */
export function completionScript(shell: (typeof COMPLETION_SHELLS)[number]): string {
  return shell === "bash" ? BASH : ZSH;
}

const HELP = `Usage: fastfence completion bash|zsh [-o text|json|yaml]

Prints the shell completion script. Install it:
  bash: source <(fastfence completion bash)          (in ~/.bashrc)
  zsh:  source <(fastfence completion zsh)           (in ~/.zshrc, after compinit)
For "kubectl fastfence" / "oc fastfence" (kubectl >= 1.26) put bin/kubectl_complete-fastfence on
PATH beside bin/kubectl-fastfence; kubectl's own completion then asks it (docs/cli.md).
${outputHelp(COMPLETION_ARGS, "json and yaml print {shell, script}")}
  -h, --help              this help`;

export async function completionCommand(argv: string[]): Promise<number> {
  const args = parseCommand(COMPLETION_ARGS, argv);
  if (args.help) return (console.log(HELP), EXIT.ok);
  const shell = args.positionals[0];
  if (!shell) throw new UsageError("completion", `which shell? ${COMPLETION_SHELLS.join(" or ")}`);
  if (!(COMPLETION_SHELLS as readonly string[]).includes(shell))
    throw new UsageError("completion", `no completion for "${shell}": ${COMPLETION_SHELLS.join(" or ")}`);
  const script = completionScript(shell as (typeof COMPLETION_SHELLS)[number]);
  if (args.output === "text") console.log(script.trimEnd());
  else console.log(render(args.output, { shell, script }));
  return EXIT.ok;
}
