// The VM controller stand-in as a process: `node harness/kubevirt/vm-controller-main.ts
// --kubeconfig FILE (--identity NAME | --identity-host HOST) [--lease-namespace kubevirt] [--lease-name virt-controller]
// [--namespaces a,b] [--lease-duration-s 15] [--renew-deadline-s 10] [--retry-period-s 2]
// [--interval-ms 100] [--release-on-cancel]`; --identity-host HOST names it `HOST_<uuid>`
// per start, as a host-network client-go process is named. It campaigns for the Lease like KubeVirt's
// virt-controller (its defaults: 15 s / 10 s / 2 s) and runs the VM and VMI steps while it
// leads; SIGTERM or SIGINT exits, releasing the Lease only with --release-on-cancel
// (virt-controller does not release: its Lease lapses). One replica per process (the lab runs one per node).
// Harness only, never the product; it talks only to the API server of its kubeconfig.
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { LeaderElector } from "./leader-elector.ts";
import { VIRT_CONTROLLER_DEFAULTS } from "./leader-election.pure.ts";
import { VmController } from "./vm-controller.ts";

export interface StandInOptions {
  kubeconfig: string;
  identity: string;
  leaseNamespace: string;
  leaseName: string;
  namespaces?: string[];
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  intervalMs: number;
  releaseOnCancel: boolean;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export function parseStandInArgs(argv: string[]): StandInOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      kubeconfig: { type: "string" },
      identity: { type: "string" },
      "identity-host": { type: "string" },
      "lease-namespace": { type: "string", default: "kubevirt" },
      "lease-name": { type: "string", default: "virt-controller" },
      namespaces: { type: "string" },
      "lease-duration-s": {
        type: "string",
        default: String(VIRT_CONTROLLER_DEFAULTS.leaseDurationMs / 1000),
      },
      "renew-deadline-s": {
        type: "string",
        default: String(VIRT_CONTROLLER_DEFAULTS.renewDeadlineMs / 1000),
      },
      "retry-period-s": { type: "string", default: String(VIRT_CONTROLLER_DEFAULTS.retryPeriodMs / 1000) },
      "interval-ms": { type: "string", default: "100" },
      "release-on-cancel": { type: "boolean", default: false },
    },
    strict: true,
  });
  if (!values.kubeconfig) throw new UsageError("--kubeconfig is required");
  if (values.identity && values["identity-host"])
    throw new UsageError("--identity and --identity-host name the same thing: give one");
  const host = values["identity-host"];
  if (host !== undefined && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(host))
    throw new UsageError(`--identity-host must be a host name, got "${host}"`);
  const identity = values.identity ?? (host ? `${host}_${randomUUID()}` : undefined);
  if (!identity) throw new UsageError("--identity or --identity-host is required");
  const num = (flag: string, v: string | undefined, scale: number) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0)
      throw new UsageError(`--${flag} must be a positive number, got "${v}"`);
    return n * scale;
  };
  return {
    kubeconfig: values.kubeconfig,
    identity,
    leaseNamespace: values["lease-namespace"],
    leaseName: values["lease-name"],
    ...(values.namespaces ? { namespaces: values.namespaces.split(",").filter(Boolean) } : {}),
    leaseDurationMs: num("lease-duration-s", values["lease-duration-s"], 1000),
    renewDeadlineMs: num("renew-deadline-s", values["renew-deadline-s"], 1000),
    retryPeriodMs: num("retry-period-s", values["retry-period-s"], 1000),
    intervalMs: num("interval-ms", values["interval-ms"], 1),
    releaseOnCancel: values["release-on-cancel"],
  };
}

/** Campaign and run until `signal` aborts; then the Lease is released. */
export async function runStandIn(
  o: StandInOptions,
  signal: AbortSignal,
  log: (m: string) => void,
): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(o.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  await core
    .createNamespace({ body: { metadata: { name: o.leaseNamespace } } })
    .catch((err: { code?: number }) => {
      if (err.code !== 409) throw err;
    });
  const controller = new VmController(
    { core, custom: kc.makeApiClient(CustomObjectsApi) },
    { ...(o.namespaces ? { namespaces: o.namespaces } : {}), intervalMs: o.intervalMs, log },
  );
  const elector = new LeaderElector(kc.makeApiClient(CoordinationV1Api), {
    namespace: o.leaseNamespace,
    name: o.leaseName,
    identity: o.identity,
    leaseDurationMs: o.leaseDurationMs,
    renewDeadlineMs: o.renewDeadlineMs,
    retryPeriodMs: o.retryPeriodMs,
    releaseOnCancel: o.releaseOnCancel,
    log,
  });
  await elector.run(signal, (leading) => controller.run(leading));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const log = (m: string) => console.log(`${new Date().toISOString()} ${m}`);
  let o: StandInOptions;
  try {
    o = parseStandInArgs(process.argv.slice(2));
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  const stop = new AbortController();
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => stop.abort());
  runStandIn(o, stop.signal, log).then(
    () => process.exit(0),
    (err: Error) => {
      console.error(err.message);
      process.exit(1);
    },
  );
}
