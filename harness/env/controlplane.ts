// A real Kubernetes control plane for the tests, the lab and the benches: etcd +
// kube-apiserver on free loopback ports, optionally kube-controller-manager and
// kube-scheduler, with a throwaway PKI (pki.ts) and an admin kubeconfig. Must never
// listen off loopback or outlive the process that started it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { BIN, EnvError } from "./base.ts";
import { kubeconfigYaml, makePki, writeUserKubeconfig } from "./pki.ts";
import { freePort } from "./ports.ts";
import { httpOk, httpsOk } from "./probes.ts";
import { ManagedProcess } from "./process.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { startAll, type EnvScope } from "./scope.ts";
import { timedStart } from "./start-times.ts";

export interface ControlPlaneOptions {
  /** Start kube-controller-manager (default false). */
  controllerManager?: boolean;
  /** Start kube-scheduler (default false). */
  scheduler?: boolean;
  /** Extra kube-apiserver flags (`--name=value`). */
  apiserverArgs?: string[];
  /**
   * Run kube-controller-manager's controllers with their own service-account credentials
   * (--use-service-account-credentials, default true, as in real clusters). Off, they use
   * the admin credentials and all controllers are running ~3 s sooner.
   */
  serviceAccountCredentials?: boolean;
  /**
   * Wait until the controller-manager's controllers are actually running, not just its
   * /healthz (default true): it starts them one by one over several seconds, and a
   * Deployment created before then waits for them. The signal is the `default`
   * ServiceAccount in namespace `default`, written by one of the last controllers started.
   */
  waitForControllers?: boolean;
  /** Extra kube-controller-manager flags, e.g. `--node-monitor-grace-period=10s`. */
  controllerManagerArgs?: string[];
  /** Extra kube-scheduler flags. */
  schedulerArgs?: string[];
  /** Readiness timeout per server (default 60 s). */
  readyTimeoutMs?: number;
}

export interface ControlPlane {
  /** Admin kubeconfig file (client cert with O=system:masters). */
  kubeconfigPath: string;
  /** https://127.0.0.1:<port> */
  server: string;
  kubeConfig: KubeConfig;
  etcdUrl: string;
  /** Temp dir holding certs, kubeconfig, etcd data and logs. */
  dir: string;
  /** PEM files, for tests that build their own clients. */
  pki: { caCert: string; caKey: string; adminCert: string; adminKey: string };
  apiserver: ManagedProcess;
  etcd: ManagedProcess;
  controllerManager?: ManagedProcess;
  scheduler?: ManagedProcess;
  /** Milliseconds each part took to become ready. */
  timings: Record<string, number>;
  /** Write another kubeconfig with a client cert for `user` in `groups`; returns its path. */
  makeUserKubeconfig(user: string, groups?: string[]): Promise<string>;
  stop(): Promise<void>;
}

/**
 * kube-controller-manager or kube-scheduler: the admin kubeconfig, a free loopback port,
 * no leader election, then `args`; `ready` resolves once its /healthz answers.
 */
async function startComponent(
  scope: EnvScope,
  o: { name: string; dir: string; certDir: string; kubeconfigPath: string; args: string[]; timeout: number },
): Promise<{ proc: ManagedProcess; ready: Promise<void> }> {
  const port = await freePort();
  const proc = ManagedProcess.spawn({
    name: o.name,
    command: join(BIN, o.name),
    dir: o.dir,
    args: [
      `--kubeconfig=${o.kubeconfigPath}`,
      `--authentication-kubeconfig=${o.kubeconfigPath}`,
      `--authorization-kubeconfig=${o.kubeconfigPath}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      `--cert-dir=${join(o.dir, o.certDir)}`,
      "--leader-elect=false",
      ...o.args,
    ],
  });
  scope.add({ stop: () => proc.stop() });
  const ready = proc.waitReady(
    () => httpsOk(`https://127.0.0.1:${port}/healthz`, { insecure: true }),
    o.timeout,
  );
  return { proc, ready };
}

/** Start etcd + kube-apiserver (+ optional controller-manager and scheduler). */
async function startControlPlaneNow(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const timeout = opts.readyTimeoutMs ?? 60_000;
  const dir = makeTempDir("kube");
  const timings: Record<string, number> = {};
  const t0 = Date.now();
  try {
    return await startAll(async (scope) => {
      scope.add({ stop: async () => removeTempDir(dir) });
      const [clientPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];

      // etcd first (it needs no certs), PKI generation meanwhile.
      const etcdUrl = `http://127.0.0.1:${clientPort}`;
      const etcd = ManagedProcess.spawn({
        name: "etcd",
        command: join(BIN, "etcd"),
        dir,
        args: [
          "--name=default",
          `--data-dir=${join(dir, "etcd-data")}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
          "--unsafe-no-fsync",
          "--log-level=warn",
          "--quota-backend-bytes=1073741824",
        ],
      });
      scope.add({ stop: () => etcd.stop() });
      const pki = await makePki(dir);
      timings.pki = Date.now() - t0;
      await etcd.waitReady(() => httpOk(`${etcdUrl}/health`), timeout);
      timings.etcd = Date.now() - t0;

      const server = `https://127.0.0.1:${apiPort}`;
      const kubeconfigPath = join(dir, "admin.kubeconfig");
      writeFileSync(kubeconfigPath, kubeconfigYaml(server, pki.caCert, pki.adminCert, pki.adminKey, "admin"));
      const apiserver = ManagedProcess.spawn({
        name: "kube-apiserver",
        command: join(BIN, "kube-apiserver"),
        dir,
        args: [
          `--etcd-servers=${etcdUrl}`,
          "--bind-address=127.0.0.1",
          "--advertise-address=127.0.0.1",
          `--secure-port=${apiPort}`,
          `--cert-dir=${join(dir, "apiserver-certs")}`,
          `--tls-cert-file=${pki.servingCert}`,
          `--tls-private-key-file=${pki.servingKey}`,
          `--client-ca-file=${pki.caCert}`,
          `--service-account-key-file=${pki.saPub}`,
          `--service-account-signing-key-file=${pki.saKey}`,
          "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
          "--api-audiences=https://kubernetes.default.svc.cluster.local",
          "--authorization-mode=Node,RBAC",
          "--service-cluster-ip-range=10.96.0.0/16",
          "--disable-admission-plugins=ServiceAccount",
          "--profiling=false",
          "--enable-priority-and-fairness=false",
          // As kubeadm, OpenShift and every distribution run it: the event source's pod is
          // privileged (its node's watchdog device); Pod Security and SCCs still police it.
          "--allow-privileged=true",
          ...(opts.apiserverArgs ?? []),
        ],
      });
      scope.add({ stop: () => apiserver.stop() });
      const tls = {
        ca: readFileSync(pki.caCert),
        cert: readFileSync(pki.adminCert),
        key: readFileSync(pki.adminKey),
      };
      await apiserver.waitReady(() => httpsOk(`${server}/readyz`, tls), timeout);
      timings.apiserver = Date.now() - t0;

      const waits: Promise<void>[] = [];
      const component = async (name: string, certDir: string, timing: string, args: string[]) => {
        const c = await startComponent(scope, { name, dir, certDir, kubeconfigPath, args, timeout });
        waits.push(c.ready.then(() => void (timings[timing] = Date.now() - t0)));
        return c.proc;
      };
      const controllerManager = opts.controllerManager
        ? await component("kube-controller-manager", "kcm-certs", "controllerManager", [
            "--controllers=*",
            `--use-service-account-credentials=${opts.serviceAccountCredentials ?? true}`,
            `--service-account-private-key-file=${pki.saKey}`,
            `--root-ca-file=${pki.caCert}`,
            `--cluster-signing-cert-file=${pki.caCert}`,
            `--cluster-signing-key-file=${pki.caKey}`,
            "--profiling=false",
            ...(opts.controllerManagerArgs ?? []),
          ])
        : undefined;
      const scheduler = opts.scheduler
        ? await component("kube-scheduler", "scheduler-certs", "scheduler", [
            "--profiling=false",
            ...(opts.schedulerArgs ?? []),
          ])
        : undefined;
      await Promise.all(waits);

      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(kubeconfigPath);
      if (controllerManager && (opts.waitForControllers ?? true)) {
        const core = kubeConfig.makeApiClient(CoreV1Api);
        await controllerManager.waitReady(
          async () => (await core.listNamespacedServiceAccount({ namespace: "default" })).items.length > 0,
          timeout,
        );
        timings.controllersStarted = Date.now() - t0;
      }
      const stopAll = async (): Promise<void> => {
        await scope.stopAll();
      };
      return {
        kubeconfigPath,
        server,
        kubeConfig,
        etcdUrl,
        dir,
        pki: { caCert: pki.caCert, caKey: pki.caKey, adminCert: pki.adminCert, adminKey: pki.adminKey },
        apiserver,
        etcd,
        ...(controllerManager ? { controllerManager } : {}),
        ...(scheduler ? { scheduler } : {}),
        timings,
        makeUserKubeconfig: (user: string, groups: string[] = []): Promise<string> =>
          writeUserKubeconfig({ dir, server, caCert: pki.caCert, caKey: pki.caKey }, user, groups),
        stop: stopAll,
      };
    });
  } catch (err) {
    if (err instanceof EnvError) throw err;
    throw new EnvError("control plane failed to start", { cause: err });
  }
}

/** Start etcd + kube-apiserver (+ optional controller-manager and scheduler); timed (start-times.ts). */
export function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const parts = [
    "apiserver",
    opts.controllerManager ? "controller-manager" : "",
    opts.scheduler ? "scheduler" : "",
  ];
  return timedStart("control-plane", parts.filter(Boolean).join("+"), () => startControlPlaneNow(opts));
}
