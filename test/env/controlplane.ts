// A real Kubernetes control plane for integration tests: etcd + kube-apiserver on free
// loopback ports, optionally kube-controller-manager and kube-scheduler, with a throwaway
// CA, serving cert, admin client cert (O=system:masters) and service-account key pair,
// and an admin kubeconfig. Must never listen off loopback or outlive the test process.
import { generateKeyPairSync } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { get as httpsGet } from "node:https";
import { get as httpGet } from "node:http";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import {
  BIN,
  EnvError,
  ManagedProcess,
  freePort,
  makeTempDir,
  removeTempDir,
  runCommand,
  startAll,
} from "./process.ts";

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

interface Pki {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saPub: string;
  saKey: string;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  await runCommand("openssl", args, { cwd: dir, timeoutMs: 20_000 });
}

/** Issue a cert signed by the CA in `dir` (EC P-256, 1 day). */
async function issueCert(
  dir: string,
  base: string,
  subject: string,
  ext: string,
): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${base}.key`);
  const csr = join(dir, `${base}.csr`);
  const cert = join(dir, `${base}.crt`);
  const extFile = join(dir, `${base}.ext`);
  writeFileSync(extFile, ext);
  await openssl(
    dir,
    ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"].concat([
      "-keyout",
      key,
      "-out",
      csr,
      "-subj",
      subject,
    ]),
  );
  await openssl(
    dir,
    ["x509", "-req", "-in", csr, "-CA", join(dir, "ca.crt"), "-CAkey", join(dir, "ca.key")].concat([
      "-CAcreateserial",
      "-days",
      "2",
      "-out",
      cert,
      "-extfile",
      extFile,
    ]),
  );
  return { cert, key };
}

async function makePki(dir: string): Promise<Pki> {
  const caKey = join(dir, "ca.key");
  const caCert = join(dir, "ca.crt");
  await openssl(
    dir,
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
      .concat(["-keyout", caKey, "-out", caCert, "-days", "2", "-subj", "/CN=fastfence-test-ca"])
      .concat([
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
      ]),
  );
  const [serving, admin] = await Promise.all([
    issueCert(
      dir,
      "apiserver",
      "/CN=kube-apiserver",
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1\n" +
        "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n",
    ),
    issueCert(
      dir,
      "admin",
      "/O=system:masters/CN=fastfence-admin",
      "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n",
    ),
  ]);
  const sa = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const saPub = join(dir, "sa.pub");
  const saKey = join(dir, "sa.key");
  writeFileSync(saPub, sa.publicKey.export({ type: "spki", format: "pem" }));
  writeFileSync(saKey, sa.privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  return {
    caCert,
    caKey,
    servingCert: serving.cert,
    servingKey: serving.key,
    adminCert: admin.cert,
    adminKey: admin.key,
    saPub,
    saKey,
  };
}

function kubeconfigYaml(server: string, caCert: string, cert: string, key: string, user: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: fastfence-test",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority: ${caCert}`,
    "users:",
    `- name: ${user}`,
    "  user:",
    `    client-certificate: ${cert}`,
    `    client-key: ${key}`,
    "contexts:",
    "- name: fastfence-test",
    "  context:",
    "    cluster: fastfence-test",
    `    user: ${user}`,
    "current-context: fastfence-test",
    "",
  ].join("\n");
}

function httpOk(url: string): Promise<boolean> {
  return new Promise((res) => {
    const req = httpGet(url, { timeout: 1000 }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
  });
}

function httpsOk(
  url: string,
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer; insecure?: boolean },
): Promise<boolean> {
  return new Promise((res) => {
    const req = httpsGet(
      url,
      {
        timeout: 1000,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        rejectUnauthorized: !tls.insecure,
      },
      (r) => {
        r.resume();
        res(r.statusCode === 200);
      },
    );
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
  });
}

/** Start etcd + kube-apiserver (+ optional controller-manager and scheduler). */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
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

      let controllerManager: ManagedProcess | undefined;
      let scheduler: ManagedProcess | undefined;
      const waits: Promise<void>[] = [];
      if (opts.controllerManager) {
        const port = await freePort();
        const cm = ManagedProcess.spawn({
          name: "kube-controller-manager",
          command: join(BIN, "kube-controller-manager"),
          dir,
          args: [
            `--kubeconfig=${kubeconfigPath}`,
            `--authentication-kubeconfig=${kubeconfigPath}`,
            `--authorization-kubeconfig=${kubeconfigPath}`,
            "--bind-address=127.0.0.1",
            `--secure-port=${port}`,
            `--cert-dir=${join(dir, "kcm-certs")}`,
            "--leader-elect=false",
            "--controllers=*",
            `--use-service-account-credentials=${opts.serviceAccountCredentials ?? true}`,
            `--service-account-private-key-file=${pki.saKey}`,
            `--root-ca-file=${pki.caCert}`,
            `--cluster-signing-cert-file=${pki.caCert}`,
            `--cluster-signing-key-file=${pki.caKey}`,
            "--profiling=false",
            ...(opts.controllerManagerArgs ?? []),
          ],
        });
        controllerManager = cm;
        scope.add({ stop: () => cm.stop() });
        waits.push(
          cm
            .waitReady(() => httpsOk(`https://127.0.0.1:${port}/healthz`, { insecure: true }), timeout)
            .then(() => void (timings.controllerManager = Date.now() - t0)),
        );
      }
      if (opts.scheduler) {
        const port = await freePort();
        const sch = ManagedProcess.spawn({
          name: "kube-scheduler",
          command: join(BIN, "kube-scheduler"),
          dir,
          args: [
            `--kubeconfig=${kubeconfigPath}`,
            `--authentication-kubeconfig=${kubeconfigPath}`,
            `--authorization-kubeconfig=${kubeconfigPath}`,
            "--bind-address=127.0.0.1",
            `--secure-port=${port}`,
            `--cert-dir=${join(dir, "scheduler-certs")}`,
            "--leader-elect=false",
            "--profiling=false",
            ...(opts.schedulerArgs ?? []),
          ],
        });
        scheduler = sch;
        scope.add({ stop: () => sch.stop() });
        waits.push(
          sch
            .waitReady(() => httpsOk(`https://127.0.0.1:${port}/healthz`, { insecure: true }), timeout)
            .then(() => void (timings.scheduler = Date.now() - t0)),
        );
      }
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
        async makeUserKubeconfig(user: string, groups: string[] = []): Promise<string> {
          const base = `user-${user.replace(/[^A-Za-z0-9_.-]/g, "_")}`;
          const subject = groups.map((g) => `/O=${g}`).join("") + `/CN=${user}`;
          const c = await issueCert(
            dir,
            base,
            subject,
            "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n",
          );
          const path = join(dir, `${base}.kubeconfig`);
          writeFileSync(path, kubeconfigYaml(server, pki.caCert, c.cert, c.key, user));
          return path;
        },
        stop: stopAll,
      };
    });
  } catch (err) {
    if (err instanceof EnvError) throw err;
    throw new EnvError("control plane failed to start", { cause: err });
  }
}
