// Which cluster, as whom and in which namespace a `fastfence` command talks to: the
// kubectl-style flags --kubeconfig FILE, --context NAME and -n/--namespace NS, turned into a
// loaded KubeConfig (and a Kube client) the way kubectl would load it, and the namespace of
// fastfence's objects (NodeFences, Secrets, Events). Every command that talks to the
// Kubernetes API takes these options and loads its cluster here, so they behave the same
// everywhere. Precedence (docs/cli.md): --kubeconfig > $KUBECONFIG (a list; the first file
// that sets current-context wins, missing files are skipped) > ~/.kube/config > in-cluster;
// --context > the kubeconfig's current-context; -n > $FASTFENCE_NAMESPACE > fastfence-system
// (never the context's namespace: that is where the user works, not where fastfence runs).
// A kubeconfig it cannot use is a UsageError (exit 2) naming the file or context and the
// contexts there are. It never contacts the API server, never prints credentials, and never
// falls back to another cluster than the one named.
import { existsSync } from "node:fs";
import { delimiter } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { Kube, kubeEndpointsOptions, type KubeClientConfig } from "../infra/kube/client.ts";
import { UsageError } from "./args.ts";

/** What the flags say; undefined: not given. */
export interface KubeTargetFlags {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  namespace?: string | undefined;
}

/** The namespace of fastfence's own objects when neither -n nor $FASTFENCE_NAMESPACE says. */
export const DEFAULT_NAMESPACE = "fastfence-system";
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** -n/--namespace, else $FASTFENCE_NAMESPACE, else fastfence-system. A bad name is a UsageError. */
export function fastfenceNamespace(
  command: string,
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (flag === undefined) return env.FASTFENCE_NAMESPACE || DEFAULT_NAMESPACE;
  if (!DNS_LABEL.test(flag))
    throw new UsageError(
      command,
      `-n/--namespace takes a namespace name (lower-case letters, digits and "-", at most 63), not "${flag}"`,
    );
  return flag;
}

/** Where the kubeconfig came from, for messages. */
function sourceOf(flags: KubeTargetFlags, env: NodeJS.ProcessEnv): string {
  if (flags.kubeconfig !== undefined) return `--kubeconfig ${flags.kubeconfig}`;
  if (env.KUBECONFIG) return `$KUBECONFIG (${env.KUBECONFIG})`;
  return "~/.kube/config or in-cluster";
}

/** $KUBECONFIG's files merged as kubectl does: for every name the first file wins, and so does its current-context. */
function loadKubeconfigList(command: string, list: string): KubeConfig {
  const files = list.split(delimiter).filter((f) => f && existsSync(f));
  if (!files.length)
    throw new UsageError(command, `no file of $KUBECONFIG exists (${list}); pass --kubeconfig FILE`);
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: [], users: [], contexts: [], currentContext: "" });
  for (const file of files) {
    const one = readFile(command, file, "$KUBECONFIG");
    if (!kc.currentContext && one.currentContext) kc.setCurrentContext(one.currentContext);
    for (const c of one.clusters) if (!kc.getCluster(c.name)) kc.addCluster(c);
    for (const u of one.users) if (!kc.getUser(u.name)) kc.addUser(u);
    for (const c of one.contexts) if (!kc.getContextObject(c.name)) kc.addContext(c);
  }
  return kc;
}

function readFile(command: string, file: string, flag: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(file);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new UsageError(
      command,
      typeof code === "string"
        ? `${flag} ${file}: cannot read it (${code})`
        : `${flag} ${file} is not a usable kubeconfig: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return kc;
}

/**
 * The kubeconfig the flags (or the environment) name, with --context made current. Throws
 * UsageError for a file it cannot read, an unknown context (listing those there are) or a
 * kubeconfig without a current context or cluster.
 */
export function loadKubeConfig(
  command: string,
  flags: KubeTargetFlags,
  env: NodeJS.ProcessEnv = process.env,
): KubeConfig {
  let kc: KubeConfig;
  if (flags.kubeconfig !== undefined) {
    if (!flags.kubeconfig) throw new UsageError(command, "--kubeconfig needs a file name");
    kc = readFile(command, flags.kubeconfig, "--kubeconfig");
  } else if (env.KUBECONFIG) {
    kc = loadKubeconfigList(command, env.KUBECONFIG);
  } else {
    kc = new KubeConfig();
    try {
      kc.loadFromDefault();
    } catch (err) {
      throw new UsageError(
        command,
        `no usable kubeconfig (~/.kube/config or in-cluster): ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
  const names = kc.getContexts().map((c) => c.name);
  const listed = names.length ? `the contexts there: ${names.join(", ")}` : "it has no contexts";
  if (flags.context !== undefined) {
    if (!kc.getContextObject(flags.context))
      throw new UsageError(
        command,
        `--context ${flags.context}: no such context in ${sourceOf(flags, env)}; ${listed}`,
      );
    kc.setCurrentContext(flags.context);
  }
  const ctx = kc.getContextObject(kc.getCurrentContext());
  if (!ctx)
    throw new UsageError(
      command,
      `${sourceOf(flags, env)} has no current context${kc.currentContext ? ` (current-context ${kc.currentContext} is not defined there)` : ""}: pass --context NAME; ${listed}`,
    );
  if (!kc.getCurrentCluster())
    throw new UsageError(
      command,
      `context ${ctx.name} of ${sourceOf(flags, env)} names cluster ${ctx.cluster}, which is not defined there`,
    );
  return kc;
}

/**
 * A client for the cluster the flags name. $FASTFENCE_KUBE_ENDPOINTS (extra API server
 * addresses of the deployment's cluster) is used only when neither --kubeconfig nor
 * --context was given: a cluster named on the command line is never swapped for another.
 */
export function connectKube(
  command: string,
  flags: KubeTargetFlags,
  cfg: KubeClientConfig = {},
  env: NodeJS.ProcessEnv = process.env,
): Kube {
  const kc = loadKubeConfig(command, flags, env);
  const named = flags.kubeconfig !== undefined || flags.context !== undefined;
  return new Kube(kc, { ...(named ? {} : kubeEndpointsOptions(env.FASTFENCE_KUBE_ENDPOINTS)), ...cfg });
}

/** What the kube target is, for a message: "context NAME (https://server)". */
export function describeTarget(kc: KubeConfig): string {
  return `context ${kc.getCurrentContext()} (${kc.getCurrentCluster()?.server ?? "no server"})`;
}

/**
 * For `run` and `source`, which read their settings from FASTFENCE_* variables: -n as
 * FASTFENCE_NAMESPACE, and no FASTFENCE_KUBE_ENDPOINTS when --kubeconfig or --context names
 * the cluster (those extra API servers belong to the deployment's own cluster).
 */
export function kubeTargetEnv(command: string, flags: KubeTargetFlags): Record<string, string | undefined> {
  return {
    ...(flags.namespace !== undefined
      ? { FASTFENCE_NAMESPACE: fastfenceNamespace(command, flags.namespace) }
      : {}),
    ...(flags.kubeconfig !== undefined || flags.context !== undefined
      ? { FASTFENCE_KUBE_ENDPOINTS: undefined }
      : {}),
  };
}
