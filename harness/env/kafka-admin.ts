// A test Kafka cluster as the harness's super user (fastfence-admin) sees it, through
// @platformatic/kafka: its Admin client (topics, groups, ACLs, configs, quotas, log dirs)
// plus the SCRAM credential requests that client has no method for, sent on one of its
// own authenticated connections. For reading and restoring the shared cluster's state
// (kafka-state.ts, kafka-reset.ts). It connects only to the bootstrap it is given and
// never logs a password.
import { pbkdf2Sync, randomBytes } from "node:crypto";
import {
  Admin,
  alterUserScramCredentialsV0,
  ConfigResourceTypes,
  describeConfigsV4,
  describeUserScramCredentialsV0,
  incrementalAlterConfigsV1,
  metadataV12,
  ScramMechanisms,
  type ConfigDescription,
  type Connection,
  type DescribeConfigsOptions,
  type IncrementalAlterConfigsOptions,
} from "@platformatic/kafka";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";
import { clientOptions } from "../../infra/bus/platformatic-client.ts";
import { EnvError } from "./base.ts";

/** The SCRAM iterations of the users the harness creates (StorageTool's default). */
export const SCRAM_ITERATIONS = 4096;

/** A user's SCRAM credentials as the broker describes them: mechanism -> iterations. */
export type ScramCredentials = Record<string, number>;

type ConfigResource = { resourceType: number; resourceName: string };

/** A topic as the broker's metadata lists it. */
export interface TopicMetadata {
  /** One the broker keeps for itself (__consumer_offsets ...). */
  internal: boolean;
  /** Each partition's leader (-1: none). */
  leaders: number[];
}

export interface KafkaAdmin {
  admin: Admin;
  /** The broker ids and every topic, internal ones included (Admin.metadata leaves those out). */
  metadata(): Promise<{ brokers: number[]; topics: Map<string, TopicMetadata> }>;
  /**
   * DescribeConfigs, each broker's resources sent to that broker. (Admin.describeConfigs
   * takes the cluster-wide default broker resource, name "", for broker 0.)
   */
  describeConfigs(resources: DescribeConfigsOptions["resources"]): Promise<ConfigDescription[]>;
  /** IncrementalAlterConfigs, routed as describeConfigs. */
  alterConfigs(resources: IncrementalAlterConfigsOptions["resources"]): Promise<void>;
  /** Every user with SCRAM credentials. */
  describeScram(): Promise<Record<string, ScramCredentials>>;
  /** Delete `deletions` (user, mechanism name); set SCRAM-SHA-512 for `passwords` (user -> password). */
  alterScram(
    deletions: { user: string; mechanism: string }[],
    passwords: Record<string, string>,
  ): Promise<void>;
  close(): Promise<void>;
}

const MECHANISM_NAMES = new Map<number, string>([
  [ScramMechanisms.SCRAM_SHA_256, "SCRAM-SHA-256"],
  [ScramMechanisms.SCRAM_SHA_512, "SCRAM-SHA-512"],
]);
const mechanismName = (m: number): string => MECHANISM_NAMES.get(m) ?? `SCRAM mechanism ${m}`;
function mechanismValue(name: string): number {
  for (const [v, n] of MECHANISM_NAMES) if (n === name) return v;
  throw new EnvError(`unknown SCRAM mechanism ${name}`);
}

/** SCRAM-SHA-512 stored credentials for `password`: what AlterUserScramCredentials upserts. */
function scramSha512(password: string): { salt: Buffer; saltedPassword: Buffer } {
  const salt = randomBytes(32);
  const saltedPassword = pbkdf2Sync(password, salt, SCRAM_ITERATIONS, 64, "sha512");
  return { salt, saltedPassword };
}

/** The admin of the cluster at `bootstrap`, connecting as `security` (the super user). */
export function openKafkaAdmin(bootstrap: string, security: KafkaSecurity): KafkaAdmin {
  const admin = new Admin({
    ...clientOptions(
      {
        brokers: bootstrap,
        clientId: "fastfence-harness-reset",
        requestTimeoutMs: 10_000,
        connectionTimeoutMs: 5000,
        metadataMaxAgeMs: 1000,
      },
      security,
    ),
  });
  const connection = async (broker?: number): Promise<Connection> => {
    const conns = await admin.connectToBrokers(null);
    const conn = broker === undefined ? [...conns.values()][0] : conns.get(broker);
    if (!conn) throw new EnvError(`broker ${broker ?? "(any)"} of ${bootstrap} did not answer`);
    return conn;
  };
  /** Resources by the broker that must answer for them (undefined: any). */
  const byBroker = <R extends ConfigResource>(resources: readonly R[]): Map<number | undefined, R[]> => {
    const out = new Map<number | undefined, R[]>();
    for (const r of resources) {
      const own = r.resourceType === ConfigResourceTypes.BROKER && r.resourceName !== "";
      const key = own ? Number(r.resourceName) : undefined;
      out.set(key, [...(out.get(key) ?? []), r]);
    }
    return out;
  };
  return {
    admin,
    metadata: async () => {
      const md = await metadataV12.api.async(await connection(), null, false, false);
      const topics = new Map<string, TopicMetadata>();
      for (const t of md.topics)
        if (t.name)
          topics.set(t.name, { internal: t.isInternal, leaders: t.partitions.map((p) => p.leaderId) });
      return { brokers: md.brokers.map((b) => b.nodeId), topics };
    },
    describeConfigs: async (resources) => {
      const parts = await Promise.all(
        [...byBroker(resources)].map(
          async ([broker, rs]) =>
            (await describeConfigsV4.api.async(await connection(broker), rs, false, false)).results,
        ),
      );
      return parts.flat().map((r) => ({
        resourceType: r.resourceType,
        resourceName: r.resourceName,
        configs: r.configs,
      }));
    },
    alterConfigs: async (resources) => {
      for (const [broker, rs] of byBroker(resources))
        await incrementalAlterConfigsV1.api.async(await connection(broker), rs, false);
    },
    describeScram: async () => {
      const res = await describeUserScramCredentialsV0.api.async(await connection(), null);
      const out: Record<string, ScramCredentials> = {};
      for (const r of res.results)
        out[r.user] = Object.fromEntries(
          r.credentialInfos.map((c) => [mechanismName(c.mechanism), c.iterations]),
        );
      return out;
    },
    alterScram: async (deletions, passwords) => {
      const upsertions = Object.entries(passwords).map(([name, pw]) => ({
        name,
        mechanism: ScramMechanisms.SCRAM_SHA_512,
        iterations: SCRAM_ITERATIONS,
        ...scramSha512(pw),
      }));
      const del = deletions.map((d) => ({ name: d.user, mechanism: mechanismValue(d.mechanism) }));
      if (del.length + upsertions.length === 0) return;
      await alterUserScramCredentialsV0.api.async(await connection(), del, upsertions);
    },
    close: () => admin.close(),
  };
}
