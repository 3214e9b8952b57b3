// Authentication and authorization of the harness's and the lab's Kafka brokers, as the
// product runs them: a throwaway CA and one broker certificate (IP SANs), a SASL_SSL
// client listener with SCRAM-SHA-512 users added at format time, an mTLS controller
// listener, and Kafka's StandardAuthorizer with allow.everyone.if.no.acl.found=false.
// The users and their ACLs are read FROM the KafkaUser objects of knative/base/kafka (no
// Strimzi operator here), plus the `fastfence-admin` super user that creates topics and
// ACLs. Passwords are random per cluster and never logged; files are written only into
// the directory it is given.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import kafkajs, { Kafka, logLevel } from "kafkajs";
import { kafkaUserName, type KafkaAclEntry, type KafkaPrincipal } from "../../events/kafka-acls.ts";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";
import { readManifests } from "./apply.ts";
import { EnvError, ROOT, sleep } from "./base.ts";
import { issueCert, makeCa } from "./pki.ts";

// kafkajs is CommonJS; Node detects only some of its named exports, so take these from the default.
const { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } = kafkajs;

/** Where the KafkaUsers the brokers get their users and ACLs from live. */
export const KAFKA_USERS_MANIFEST = join(ROOT, "knative/base/kafka/users.yaml");
/** The brokers' own certificate CN; a super user on the controller listener (mTLS). */
const BROKER_CN = "fastfence-kafka-broker";
const ADMIN = kafkaUserName("admin");

export interface ManifestKafkaUser {
  name: string;
  acls: KafkaAclEntry[];
}

interface StrimziAcl {
  resource: { type: string; name: string; patternType?: string };
  operations: string[];
  type?: string;
  host?: string;
}

/** The KafkaUsers of the manifests, their ACLs flattened to one entry per operation. */
export function readKafkaUsers(path = KAFKA_USERS_MANIFEST): ManifestKafkaUser[] {
  return readManifests(path, (o) => o.kind === "KafkaUser").map((o) => {
    const spec = (
      o as unknown as {
        spec: { authentication?: { type: string }; authorization?: { type: string; acls?: StrimziAcl[] } };
      }
    ).spec;
    const name = o.metadata!.name!;
    if (spec.authentication?.type !== "scram-sha-512")
      throw new EnvError(`KafkaUser ${name}: authentication must be scram-sha-512`);
    if (spec.authorization?.type !== "simple")
      throw new EnvError(`KafkaUser ${name}: authorization must be simple`);
    const acls: KafkaAclEntry[] = [];
    for (const a of spec.authorization.acls ?? []) {
      if ((a.type ?? "allow") !== "allow" || (a.host ?? "*") !== "*")
        throw new EnvError(`KafkaUser ${name}: only allow rules for every host are supported`);
      for (const op of a.operations)
        acls.push({
          resourceType: a.resource.type as KafkaAclEntry["resourceType"],
          name: a.resource.name,
          patternType: (a.resource.patternType ?? "literal") as KafkaAclEntry["patternType"],
          operation: op as KafkaAclEntry["operation"],
        });
    }
    return { name, acls };
  });
}

export interface KafkaAuth {
  dir: string;
  /** The CA's certificate (PEM file), what clients trust. */
  caFile: string;
  /** Users (KafkaUser name -> password): the manifests' users and fastfence-admin. */
  passwords: Map<string, string>;
  users: ManifestKafkaUser[];
  /** server.properties entries for the listeners' security (merge into a broker's). */
  brokerProps: Record<string, string>;
  /** StorageTool `format` arguments that create the SCRAM users. */
  formatArgs: string[];
}

/**
 * A CA, one broker certificate for `ips` (and 127.0.0.1), passwords for the manifests'
 * users and the admin, and the broker settings that use them. `listener` is the client
 * listener's name (inter-broker traffic uses it too, as the admin).
 */
export async function makeKafkaAuth(
  dir: string,
  ips: readonly string[],
  listener = "CLIENT",
): Promise<KafkaAuth> {
  mkdirSync(dir, { recursive: true });
  const { caCert } = await makeCa(dir, "fastfence-kafka-test-ca");
  const sans = [...new Set(["127.0.0.1", ...ips])].map((ip) => `IP:${ip}`).join(",");
  const broker = await issueCert(
    dir,
    "broker",
    `/CN=${BROKER_CN}`,
    `subjectAltName=${sans},DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n`,
  );
  const users = readKafkaUsers();
  const passwords = new Map<string, string>();
  for (const name of [ADMIN, ...users.map((u) => u.name)])
    passwords.set(name, randomBytes(18).toString("hex"));
  const adminPw = passwords.get(ADMIN)!;
  // PEM given inline (Java properties turn "\n" into newlines): an unencrypted key is
  // accepted inline, a key file would need a key password.
  const inline = (path: string) => readFileSync(path, "utf8").trim().replace(/\r?\n/g, "\\n");
  const l = listener.toLowerCase();
  const brokerProps: Record<string, string> = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    [`listener.name.${l}.scram-sha-512.sasl.jaas.config`]: `org.apache.kafka.common.security.scram.ScramLoginModule required username="${ADMIN}" password="${adminPw}";`,
    "ssl.keystore.type": "PEM",
    "ssl.keystore.certificate.chain": inline(broker.cert),
    "ssl.keystore.key": inline(broker.key),
    "ssl.truststore.type": "PEM",
    "ssl.truststore.certificates": inline(caCert),
    "ssl.endpoint.identification.algorithm": "https",
    // The controller listener takes only the brokers' own certificate (mutual TLS).
    "listener.name.controller.ssl.client.auth": "required",
    "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "super.users": `User:${ADMIN};User:${BROKER_CN}`,
  };
  const formatArgs = [...passwords].flatMap(([name, pw]) => [
    "--add-scram",
    `SCRAM-SHA-512=[name=${name},password=${pw}]`,
  ]);
  return { dir, caFile: caCert, passwords, users, brokerProps, formatArgs };
}

/** The listener security protocol map entries for `listener` (SASL_SSL) and CONTROLLER (SSL). */
export function securityProtocolMap(listener = "CLIENT"): string {
  return `${listener}:SASL_SSL,CONTROLLER:SSL`;
}

/** What KafkaJsBus / new Kafka need to connect as `principal`. */
export function clientSecurityOf(
  auth: Pick<KafkaAuth, "caFile" | "passwords">,
  principal: KafkaPrincipal,
): KafkaSecurity {
  const username = kafkaUserName(principal);
  const password = auth.passwords.get(username);
  if (!password) throw new EnvError(`no Kafka user ${username} in ${KAFKA_USERS_MANIFEST}`);
  return {
    ssl: { ca: readFileSync(auth.caFile, "utf8") },
    sasl: { mechanism: "scram-sha-512", username, password },
  };
}

/**
 * The FASTFENCE_KAFKA_* settings of a process connecting as `principal`, with its password
 * in a file under the auth dir as a Secret mount would hold it (what infra/config.ts reads).
 */
export function clientEnvOf(
  auth: Pick<KafkaAuth, "dir" | "caFile" | "passwords">,
  principal: KafkaPrincipal,
): Record<string, string> {
  const username = kafkaUserName(principal);
  const password = auth.passwords.get(username);
  if (!password) throw new EnvError(`no Kafka user ${username} in ${KAFKA_USERS_MANIFEST}`);
  const dir = join(auth.dir, "users", username);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "password"), password, { mode: 0o600 });
  return {
    FASTFENCE_KAFKA_CA_FILE: auth.caFile,
    FASTFENCE_KAFKA_USERNAME: username,
    FASTFENCE_KAFKA_PASSWORD_FILE: join(dir, "password"),
  };
}

const RESOURCE = { topic: AclResourceTypes.TOPIC, group: AclResourceTypes.GROUP } as const;
const PATTERN = { literal: ResourcePatternTypes.LITERAL, prefix: ResourcePatternTypes.PREFIXED } as const;
const OPERATION = {
  Read: AclOperationTypes.READ,
  Write: AclOperationTypes.WRITE,
  Describe: AclOperationTypes.DESCRIBE,
} as const;

/**
 * Creates every manifest user's ACLs as the admin, then waits until the broker answers
 * with all of them (ACLs travel through the metadata log to every broker).
 */
export async function applyKafkaAcls(
  bootstrap: string,
  admin: KafkaSecurity,
  users: readonly ManifestKafkaUser[],
  timeoutMs = 30_000,
): Promise<void> {
  const kafka = new Kafka({
    clientId: "fastfence-acl-setup",
    brokers: bootstrap.split(","),
    logLevel: logLevel.NOTHING,
    ...admin,
    retry: { retries: 5, initialRetryTime: 100 },
  });
  const client = kafka.admin();
  await client.connect();
  try {
    const acl = users.flatMap((u) =>
      u.acls.map((a) => {
        const operation = OPERATION[a.operation];
        if (operation === undefined)
          throw new EnvError(`KafkaUser ${u.name}: unsupported operation ${a.operation}`);
        return {
          resourceType: RESOURCE[a.resourceType],
          resourceName: a.name,
          resourcePatternType: PATTERN[a.patternType],
          principal: `User:${u.name}`,
          host: "*",
          operation,
          permissionType: AclPermissionTypes.ALLOW,
        };
      }),
    );
    await client.createAcls({ acl });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = await client.describeAcls({
        resourceType: AclResourceTypes.ANY,
        resourcePatternType: ResourcePatternTypes.ANY,
        operation: AclOperationTypes.ANY,
        permissionType: AclPermissionTypes.ANY,
      });
      const n = got.resources.reduce((s, r) => s + r.acls.length, 0);
      if (n >= acl.length) return;
      if (Date.now() > deadline)
        throw new EnvError(`Kafka ACLs: ${n} of ${acl.length} visible after ${timeoutMs} ms`);
      await sleep(50);
    }
  } finally {
    await client.disconnect();
  }
}

/**
 * Writes each user's password as `dir`/<user>/password (0600) and the CA as `dir`/ca.crt,
 * the way Secret volumes present them (the lab's replicas read these).
 */
export function writeCredentialFiles(auth: KafkaAuth, dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "ca.crt"), readFileSync(auth.caFile));
  for (const [name, pw] of auth.passwords) {
    mkdirSync(join(dir, name), { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, name, "password"), pw, { mode: 0o600 });
  }
}
