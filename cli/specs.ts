// The command lines of `fastfence`: each command's options, positionals and -o formats
// (defineCommand) and the fixed words its positionals take (bmc's actions, events'
// subcommand), for the commands whose modules load heavy clients; run, source, lab and
// stack-check keep theirs beside their code (cli/completion.ts collects them all). Shell
// completion, the global kubectl-style flags and each command's parser all read these same
// definitions, so they cannot drift apart. Light on purpose: it imports no Kubernetes, Kafka or BMC client (a
// completion runs on every TAB), and it never parses, prints or runs anything itself.
import type { ParseArgsOptionsConfig } from "node:util";
import { defineCommand, type CommandSpec } from "./args.ts";

/** --kubeconfig, --context and -n/--namespace: every command that talks to the Kubernetes API takes them. */
export const KUBE_TARGET_OPTIONS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
  namespace: { type: "string", short: "n" },
} as const;

/** The help lines of those options; `namespace` replaces what -n/--namespace says for the command. */
export function kubeTargetHelp(
  namespace = `the namespace fastfence runs in (its NodeFences, Leases, Secrets)
                          (default $FASTFENCE_NAMESPACE or fastfence-system, not the context's)`,
): string {
  return [
    "  --kubeconfig FILE       the kubeconfig (default $KUBECONFIG, ~/.kube/config or in-cluster)",
    "  --context NAME          the kubeconfig context to use (default its current-context)",
    `  -n, --namespace NS      ${namespace}`,
  ].join("\n");
}

/** Whether a command takes the kubectl-style flags (talks to the Kubernetes API). */
export function takesKubeTarget(spec: CommandSpec<ParseArgsOptionsConfig>): boolean {
  return Object.keys(KUBE_TARGET_OPTIONS).every((k) => Object.hasOwn(spec.options, k));
}

const OUTPUTS = ["text", "json", "yaml"] as const;

/** The options of the commands that act on one incident: why, which policy, how long to wait, which cluster. */
export const INCIDENT_COMMAND_OPTIONS = {
  reason: { type: "string" },
  policy: { type: "string" },
  wait: { type: "string" },
  ...KUBE_TARGET_OPTIONS,
} as const;

const PAUSE_OPTIONS = {
  reason: { type: "string" },
  policy: { type: "string" },
  ...KUBE_TARGET_OPTIONS,
} as const;
export const PAUSE_ARGS = defineCommand({
  command: "pause",
  options: PAUSE_OPTIONS,
  positionals: 1,
  outputs: OUTPUTS,
});
export const RESUME_ARGS = defineCommand({
  command: "resume",
  options: PAUSE_OPTIONS,
  positionals: 1,
  outputs: OUTPUTS,
});
export const FENCE_ARGS = defineCommand({
  command: "fence",
  options: { ...INCIDENT_COMMAND_OPTIONS, withdraw: { type: "boolean" } },
  positionals: 1,
  outputs: OUTPUTS,
});
export const RELEASE_SLOT_ARGS = defineCommand({
  command: "release-slot",
  options: INCIDENT_COMMAND_OPTIONS,
  positionals: 1,
  outputs: OUTPUTS,
});

export const TRACE_ARGS = defineCommand({
  command: "trace",
  options: {
    brokers: { type: "string" },
    topic: { type: "string", multiple: true },
    since: { type: "string" },
    "no-api": { type: "boolean" },
    ...KUBE_TARGET_OPTIONS,
  },
  positionals: 1,
  outputs: OUTPUTS,
  legacyJson: true,
});

/** What `fastfence bmc` does: its first positional. */
export const BMC_ACTIONS = ["status", "off", "on", "check"] as const;
export const BMC_ARGS = defineCommand({
  command: "bmc",
  options: {
    url: { type: "string" },
    node: { type: "string" },
    level: { type: "string" },
    policy: { type: "string" },
    "credentials-file": { type: "string" },
    insecure: { type: "boolean" },
    ca: { type: "string" },
    "timeout-ms": { type: "string" },
    "poll-ms": { type: "string" },
    ...KUBE_TARGET_OPTIONS,
  },
  positionals: 1,
  outputs: OUTPUTS,
  legacyJson: true,
});

/** `fastfence events`' one subcommand, and the documents --format chooses. */
export const EVENTS_SUBCOMMANDS = ["catalog"] as const;
export const EVENT_DOCUMENTS = ["catalog", "asyncapi"] as const;
export const EVENTS_ARGS = defineCommand({
  command: "events",
  options: { format: { type: "string" } },
  positionals: 1,
  outputs: OUTPUTS,
});

export const VERSION_ARGS = defineCommand({
  command: "version",
  options: {},
  positionals: 0,
  outputs: OUTPUTS,
});

/** The shells `fastfence completion` writes a script for. */
export const COMPLETION_SHELLS = ["bash", "zsh"] as const;
export const COMPLETION_ARGS = defineCommand({
  command: "completion",
  options: {},
  positionals: 1,
  outputs: OUTPUTS,
});
