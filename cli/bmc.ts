// `fastfence bmc status|off|on|check`: talk to one BMC by URL (ipmi://, redfish://,
// redfish+http(s)://, idrac-redfish://, ilo5-redfish://, fence-agent://...?agent=fence_x)
// or by node (--node NAME: the FencingPolicy's levels for that node, else its metal3
// BareMetalHost, from the cluster of --kubeconfig / --context, cli/kube-target.ts). With
// --url, credentials come from FASTFENCE_BMC_USERNAME / FASTFENCE_BMC_PASSWORD or
// --credentials-file (JSON {"username","password"} or username=/password= lines); with
// --node, from the level's Secret as it is when the command runs (a BMC's rejection names that Secret). Never from
// argv and never printed. `off` returns only after power-off is read back (S1); `check`
// verifies the credentials and reads power state without changing it.
// Output: -o text|json|yaml (one document per run). Exit codes (cli/exit-codes.ts): 0 done,
// 1 BMC failure, 2 usage or settings error.
import { readFileSync } from "node:fs";
import { FastfenceError } from "../core/errors.ts";
import { levelsForNode, type ResolvedFencingLevel } from "../core/policy.ts";
import {
  namingSecret,
  readBmcCredentials,
  type BmcCredentials,
  type SecretRef,
} from "../infra/bmc/credentials.ts";
import { powerOffAndConfirm, type BmcDriver } from "../infra/bmc/driver.ts";
import { KubeMetal3Api, discoverNodeHost, levelFromHost } from "../infra/bmc/metal3.ts";
import { driverForAddress, parseBmcAddress, redactAddress, type BmcOptions } from "../infra/bmc/settings.ts";
import { levelOptions } from "../infra/fence/power.ts";
import { describeModes, insecureLevelProblem, insecureModes } from "../core/level-security.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { connectKube, fastfenceNamespace } from "./kube-target.ts";
import { render } from "./output.ts";
import { BMC_ACTIONS, BMC_ARGS, kubeTargetHelp } from "./specs.ts";

export { BMC_ARGS };

const HELP = `Usage: fastfence bmc <status|off|on|check> (--url URL | --node NAME) [options]

  --url URL               BMC address: ipmi://host[:port], redfish://host/redfish/v1/Systems/ID,
                          redfish+http://..., idrac-redfish://..., ilo5-redfish://...,
                          fence-agent://host[:port]?agent=fence_ipmilan&lanplus=1
  --node NAME             settings from the cluster (--kubeconfig, --context): the
                          FencingPolicy's levels for the node, else its metal3 BareMetalHost;
                          credentials from the level's Secret
  --level N               with --node: which fencing level, 1-based (default 1)
  --policy NAME           with --node: the FencingPolicy (default $FASTFENCE_POLICY or "default")
  --credentials-file F    with --url: JSON {"username":..,"password":..} or username=/password= lines
                          (default: FASTFENCE_BMC_USERNAME / FASTFENCE_BMC_PASSWORD)
  --insecure              allow an insecure BMC: plain HTTP (redfish+http://) or no TLS
                          certificate checks; without it (or, with --node, the level's
                          insecure: true) such an address is refused
  --ca FILE               PEM CA bundle for the BMC's certificate (Redfish)
  --timeout-ms N          budget for the whole action (default 30000)
  --poll-ms N             read-back interval for off (default 200)
${kubeTargetHelp(`with --node: the namespace of the policy levels' Secrets
                          (default $FASTFENCE_NAMESPACE or fastfence-system, not the context's)`)}
${outputHelp(BMC_ARGS, "json and yaml print one document, also on failure")}
  -h, --help              this help
  --json                  deprecated alias of -o json (removed in the next release)

status  read power state          off  power off and wait until it reads back off
on      power on                   check  verify credentials, read state, change nothing`;

function usage(msg: string): never {
  throw new UsageError("bmc", msg);
}

export function readCredentials(file: string | undefined, env: NodeJS.ProcessEnv): BmcCredentials | string {
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return `cannot read credentials file ${file}`;
    }
    const t = text.trim();
    if (t.startsWith("{")) {
      try {
        const j = JSON.parse(t) as { username?: unknown; password?: unknown };
        if (typeof j.username === "string" && typeof j.password === "string")
          return { username: j.username, password: j.password };
      } catch {
        return `credentials file ${file} is not valid JSON`;
      }
      return `credentials file ${file} needs "username" and "password"`;
    }
    const kv = new Map<string, string>();
    for (const line of t.split("\n")) {
      const i = line.indexOf("=");
      if (i > 0) kv.set(line.slice(0, i).trim(), line.slice(i + 1).replace(/\r$/, ""));
    }
    const username = kv.get("username");
    const password = kv.get("password");
    if (username && password !== undefined) return { username, password };
    return `credentials file ${file} needs username= and password= lines`;
  }
  const username = env.FASTFENCE_BMC_USERNAME;
  const password = env.FASTFENCE_BMC_PASSWORD;
  if (!username || password === undefined) {
    return "no credentials: set FASTFENCE_BMC_USERNAME and FASTFENCE_BMC_PASSWORD, or use --credentials-file";
  }
  return { username, password };
}

/** A node's BMC as the cluster describes it; `source` names where it came from (no secrets). */
export interface NodeBmc {
  level: ResolvedFencingLevel;
  levelNumber: number;
  levels: number;
  source: string;
  secret: { namespace: string; name: string };
  creds: BmcCredentials;
}

/** Errors of --node resolution: the message says what is missing (exit 2). */
class NodeSettingsError extends FastfenceError {
  constructor(message: string, cause?: unknown) {
    super("FF_INVALID_CONFIG", message, { cause });
  }
}

/**
 * Resolves a node's BMC from the cluster: the FencingPolicy entry for the node, else its
 * BareMetalHost; then reads the credentials Secret. Errors name the missing piece.
 */
export async function nodeBmc(
  kube: Kube,
  node: string,
  opts: { policy: string; namespace: string; level: number },
): Promise<NodeBmc> {
  const policy = await new PolicyReader(kube, opts.policy, 0).get(Date.now());
  let labels: Record<string, string> = {};
  try {
    const n = await kube.call(`read node ${node}`, (a) => a.core.readNode({ name: node }));
    labels = n.metadata?.labels ?? {};
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404)
      throw new NodeSettingsError(`node ${node} not found in the cluster`, err);
    throw err;
  }
  let levels: ResolvedFencingLevel[] | undefined = levelsForNode(policy, { name: node, labels });
  let source = `FencingPolicy ${opts.policy}`;
  if (!levels) {
    try {
      const { host, settings } = await discoverNodeHost(new KubeMetal3Api(kube), node);
      levels = [levelFromHost(settings, host)];
      source = `BareMetalHost ${host.metadata?.namespace}/${host.metadata?.name}`;
    } catch (err) {
      if (!(err instanceof FastfenceError) || err.retriable) throw err;
      const why = err instanceof KubeApiError && err.status === 404 ? "no BareMetalHost CRD" : err.message;
      throw new NodeSettingsError(
        `no FencingPolicy ${opts.policy} entry matches node ${node}, and metal3 discovery found no host: ${why}`,
        err,
      );
    }
  }
  const level = levels[opts.level - 1];
  if (!level)
    throw new NodeSettingsError(
      `node ${node} has ${levels.length} fencing level(s) (${source}); no level ${opts.level}`,
    );
  const secret = {
    namespace: level.discovered?.namespace ?? opts.namespace,
    name: level.credentialsSecret,
  };
  let creds: BmcCredentials;
  try {
    creds = await readBmcCredentials(kube, secret);
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404)
      throw new NodeSettingsError(
        `credentials Secret ${secret.namespace}/${secret.name} (${source}) not found`,
        err,
      );
    if (err instanceof FastfenceError && err.code === "FF_INVALID_CONFIG")
      throw new NodeSettingsError(`${err.message} (${source})`, err);
    throw err;
  }
  return { level, levelNumber: opts.level, levels: levels.length, source, secret, creds };
}

export async function bmcCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(BMC_ARGS, argv);
  const { values: v, positionals } = parsed;
  if (parsed.help) {
    console.log(HELP);
    return EXIT.ok;
  }
  /** Structured output (-o json|yaml): one document on stdout, also for failures. */
  const structured = parsed.output !== "text";
  const action = positionals[0];
  if (!action || !(BMC_ACTIONS as readonly string[]).includes(action)) {
    return usage(
      action
        ? `unknown action "${action}": status, off, on or check`
        : "which action? status, off, on or check",
    );
  }
  if (v.node && v.url) return usage("give --url or --node, not both");
  const kubeFlag =
    v.kubeconfig !== undefined ? "--kubeconfig" : v.context !== undefined ? "--context" : undefined;
  if (v.url && (kubeFlag ?? (v.namespace !== undefined ? "-n/--namespace" : undefined)))
    return usage(
      `${kubeFlag ?? "-n/--namespace"} is for --node (the cluster's settings); --url talks to the BMC directly`,
    );
  if (!v.url && !v.node) return usage("--url or --node is required");
  const timeoutMs = Number(v["timeout-ms"] ?? 30_000);
  const pollMs = Number(v["poll-ms"] ?? 200);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    return usage(`--timeout-ms takes a positive number, not "${v["timeout-ms"]}"`);
  if (!Number.isFinite(pollMs) || pollMs <= 0)
    return usage(`--poll-ms takes a positive number, not "${v["poll-ms"]}"`);
  const levelNumber = Number(v.level ?? 1);
  if (!Number.isInteger(levelNumber) || levelNumber < 1)
    return usage(`--level takes a number from 1, not "${v.level}"`);
  let ca: string | undefined;
  if (v.ca) {
    try {
      ca = readFileSync(v.ca, "utf8");
    } catch {
      return usage(`cannot read CA bundle ${v.ca}`);
    }
  }

  let address: string;
  let creds: BmcCredentials;
  let options: BmcOptions;
  let from: string | undefined;
  let secret: SecretRef | undefined;
  if (v.node) {
    if (v["credentials-file"])
      return usage("--credentials-file is for --url; --node reads the level's Secret");
    const namespace = fastfenceNamespace("bmc", v.namespace);
    const kube = connectKube("bmc", v, { requestTimeoutMs: Math.min(timeoutMs, 10_000) });
    let nb: NodeBmc;
    try {
      nb = await nodeBmc(kube, v.node, {
        policy: v.policy ?? process.env.FASTFENCE_POLICY ?? "default",
        namespace,
        level: levelNumber,
      });
    } catch (err) {
      const fe = err instanceof FastfenceError ? err : undefined;
      const msg = `fastfence bmc ${action} --node ${v.node}: ${fe?.code ?? "FF_INTERNAL"}: ${fe?.message ?? "unexpected error"}`;
      if (structured)
        console.log(
          render(parsed.output, {
            action,
            node: v.node,
            ok: false,
            code: fe?.code ?? "FF_INTERNAL",
            error: fe?.message,
          }),
        );
      else console.error(msg);
      return err instanceof NodeSettingsError ? EXIT.usage : EXIT.failed;
    }
    address = nb.level.address;
    creds = nb.creds;
    secret = nb.secret;
    options = {
      ...levelOptions(nb.level.options, timeoutMs),
      ...(v.insecure ? { insecure: true } : {}),
      ...(ca ? { ca } : {}),
    };
    from = `${nb.source}, level ${nb.levelNumber}/${nb.levels} (${nb.level.driver}), credentials Secret ${nb.secret.namespace}/${nb.secret.name}`;
  } else {
    address = v.url!;
    try {
      parseBmcAddress(address);
    } catch (err) {
      return usage(`--url: ${err instanceof FastfenceError ? err.message : "not a BMC address"}`);
    }
    const problem = insecureLevelProblem({ address, insecure: v.insecure === true }, "--url");
    if (problem) return usage(problem.replace("the level sets insecure: true", "--insecure is given"));
    const c = readCredentials(v["credentials-file"], process.env);
    if (typeof c === "string") return usage(c);
    creds = c;
    options = { insecure: v.insecure, ca };
  }

  let driver: BmcDriver;
  try {
    driver = driverForAddress(address, creds, options);
    // a rejection names the Secret the credentials came from (read for this run)
    if (secret) driver = namingSecret(driver, secret);
  } catch (err) {
    console.error(
      `fastfence bmc: ${err instanceof FastfenceError ? err.message : "cannot build the driver"}`,
    );
    return EXIT.usage;
  }
  const target = redactAddress(address);
  // Plain HTTP or no certificate checks, as allowed by the level's insecure: true or --insecure.
  const insecure = insecureModes({ address, options: options.insecure ? { insecure: "true" } : {} });
  const warn = insecure.length ? ` — INSECURE: ${describeModes(insecure)}` : "";
  if (from && !structured) console.log(`${v.node}: ${target} from ${from}${warn}`);
  const out = (human: string, obj: Record<string, unknown>) =>
    console.log(
      render(
        parsed.output,
        { action, target, ...(v.node ? { node: v.node, from } : {}), insecure, ...obj },
        () => `${human}${warn}`,
      ),
    );
  const started = Date.now();
  try {
    switch (action) {
      case "status":
      case "check": {
        const st = await driver.status({ timeoutMs });
        out(
          action === "check"
            ? `ok: ${target} accepted the credentials; power is ${st.state} (${st.raw})`
            : `${st.state} (${st.raw})`,
          { ok: true, power: st.state, raw: st.raw, ms: Date.now() - started },
        );
        return EXIT.ok;
      }
      case "off": {
        const r = await powerOffAndConfirm(driver, { timeoutMs, pollMs, now: () => Date.now() });
        const ms = r.readBackAt - r.commandAt;
        out(`off: power-off confirmed by read-back after ${ms} ms (${r.readbacks.length} reads)`, {
          ok: true,
          power: "off",
          confirmMs: ms,
          readbacks: r.readbacks.length,
        });
        return EXIT.ok;
      }
      case "on": {
        await driver.on({ timeoutMs });
        const st = await driver.status({ timeoutMs });
        out(`on: command accepted; power now reads ${st.state} (${st.raw})`, {
          ok: true,
          power: st.state,
          raw: st.raw,
        });
        return EXIT.ok;
      }
    }
    return EXIT.usage;
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    if (structured)
      console.log(
        render(parsed.output, {
          action,
          target,
          insecure,
          ok: false,
          code: fe?.code ?? "FF_INTERNAL",
          error: fe?.message ?? "unexpected error",
        }),
      );
    else
      console.error(
        `fastfence bmc ${action}: ${fe?.code ?? "FF_INTERNAL"}: ${fe?.message ?? "unexpected error"}${warn}`,
      );
    return EXIT.failed;
  } finally {
    await driver.close?.();
  }
}
