// The throwaway PKI of a harness control plane (and of the Kafka brokers), made with
// openssl in the given temp dir: a CA, the API server's serving cert (127.0.0.1, kubernetes.default...), an
// admin client cert (O=system:masters), a service-account key pair, further client certs
// on demand, and kubeconfig files naming them. Must never write outside the dir it is given.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCommand } from "./process.ts";

export interface Pki {
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

/** A positive 127-bit certificate serial, as openssl's -set_serial takes it. */
function randomSerial(): string {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f;
  return `0x${b.toString("hex")}`;
}

/**
 * Issue a cert signed by the CA in `dir` (EC P-256, 2 days), or by `ca` when given. Each
 * cert gets a random 127-bit serial: certs are issued concurrently, and openssl's shared
 * serial file (-CAcreateserial) is read and rewritten by each signer, so two at once could fail.
 */
export async function issueCert(
  dir: string,
  base: string,
  subject: string,
  ext: string,
  ca: { caCert: string; caKey: string } = { caCert: join(dir, "ca.crt"), caKey: join(dir, "ca.key") },
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
    ["x509", "-req", "-in", csr, "-CA", ca.caCert, "-CAkey", ca.caKey].concat([
      "-set_serial",
      randomSerial(),
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

/** A self-signed CA (EC P-256, 2 days) as `dir`/ca.crt and ca.key, for issueCert. */
export async function makeCa(
  dir: string,
  cn = "fastfence-test-ca",
): Promise<{ caCert: string; caKey: string }> {
  const caKey = join(dir, "ca.key");
  const caCert = join(dir, "ca.crt");
  await openssl(
    dir,
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
      .concat(["-keyout", caKey, "-out", caCert, "-days", "2", "-subj", `/CN=${cn}`])
      .concat([
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
      ]),
  );
  return { caCert, caKey };
}

/** `extraIps`: more IP SANs for the serving cert (the lab's nodes and its API relay). */
export async function makePki(dir: string, extraIps: readonly string[] = []): Promise<Pki> {
  const { caCert, caKey } = await makeCa(dir);
  const ips = extraIps.map((ip) => `,IP:${ip}`).join("");
  const [serving, admin] = await Promise.all([
    issueCert(
      dir,
      "apiserver",
      "/CN=kube-apiserver",
      `subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1${ips}\n` +
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

/**
 * A kubeconfig with one cluster, one client-cert user and one context. `cluster` names
 * the cluster and context (default fastfence-test); `tlsServerName` is the name the
 * serving cert is checked against when the server is reached through another address.
 */
export function kubeconfigYaml(
  server: string,
  caCert: string,
  cert: string,
  key: string,
  user: string,
  opts: { cluster?: string; tlsServerName?: string } = {},
): string {
  const cluster = opts.cluster ?? "fastfence-test";
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${cluster}`,
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority: ${caCert}`,
    ...(opts.tlsServerName ? [`    tls-server-name: ${opts.tlsServerName}`] : []),
    "users:",
    `- name: ${user}`,
    "  user:",
    `    client-certificate: ${cert}`,
    `    client-key: ${key}`,
    "contexts:",
    `- name: ${cluster}`,
    "  context:",
    `    cluster: ${cluster}`,
    `    user: ${user}`,
    `current-context: ${cluster}`,
    "",
  ].join("\n");
}

/**
 * Write a kubeconfig for `server` with a client cert (issued by the CA `caCert`/`caKey`)
 * for `user` in `groups`, into `dir`; returns its path.
 */
export async function writeUserKubeconfig(
  o: { dir: string; server: string; caCert: string; caKey: string },
  user: string,
  groups: string[] = [],
): Promise<string> {
  const base = `user-${user.replace(/[^A-Za-z0-9_.-]/g, "_")}`;
  const subject = groups.map((g) => `/O=${g}`).join("") + `/CN=${user}`;
  const c = await issueCert(
    o.dir,
    base,
    subject,
    "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n",
    {
      caCert: o.caCert,
      caKey: o.caKey,
    },
  );
  const path = join(o.dir, `${base}.kubeconfig`);
  writeFileSync(path, kubeconfigYaml(o.server, o.caCert, c.cert, c.key, user));
  return path;
}
