// What a test file can change on a Kafka cluster, read as plain data: its topics (with
// partition counts and topic-level config overrides), consumer groups, ACLs, SCRAM users,
// dynamic broker configs (per broker and cluster-wide) and client quotas; and the
// differences between two such readings, one line each. The shared cluster's start state
// and its resets (kafka-reset.ts) are built on it. Reading only: it never changes the
// cluster, and never reads record contents or passwords.
import {
  AclOperations,
  AclPermissionTypes,
  ConfigResourceTypes,
  ConfigSources,
  ResourcePatternTypes,
  ResourceTypes,
  type Acl,
} from "@platformatic/kafka";
import type { KafkaAdmin, ScramCredentials } from "./kafka-admin.ts";

export interface TopicState {
  partitions: number;
  /** A topic the broker keeps for itself (__consumer_offsets ...), made on demand. */
  internal: boolean;
  /** Topic-level config overrides (name -> value); read for the topics asked for only. */
  configs: Record<string, string | null>;
}

export interface QuotaState {
  entity: { entityType: string; entityName: string | null }[];
  values: Record<string, number>;
}

/** The cluster-wide dynamic broker defaults' resource name. */
export const CLUSTER_DEFAULT = "";

export interface KafkaState {
  topics: Record<string, TopicState>;
  /** Group ids (every group type), sorted. */
  groups: string[];
  acls: Acl[];
  /** User -> SCRAM mechanism -> iterations. */
  scram: Record<string, ScramCredentials>;
  /** Broker id, or CLUSTER_DEFAULT -> dynamic config name -> value (null: sensitive). */
  brokerConfigs: Record<string, Record<string, string | null>>;
  quotas: QuotaState[];
}

/** Every ACL binding: the DescribeAcls filter that matches all. */
export const ANY_ACL = {
  resourceType: ResourceTypes.ANY,
  resourceName: null,
  resourcePatternType: ResourcePatternTypes.ANY,
  principal: null,
  host: null,
  operation: AclOperations.ANY,
  permissionType: AclPermissionTypes.ANY,
} as const;

/** An enum value's name (AclOperations.READ -> "READ"). */
const label = (e: Record<string, number>, v: number): string =>
  Object.entries(e).find(([, x]) => x === v)?.[0] ?? String(v);

export const aclKey = (a: Acl): string =>
  `${a.principal} ${label(AclPermissionTypes, a.permissionType)} ${label(AclOperations, a.operation)} on ` +
  `${label(ResourceTypes, a.resourceType)} ${label(ResourcePatternTypes, a.resourcePatternType)} ` +
  `"${a.resourceName}" from ${a.host}`;
export const quotaKey = (q: QuotaState): string =>
  q.entity.map((e) => `${e.entityType}=${e.entityName ?? "<default>"}`).join(",");

/**
 * The cluster now. Topic configs are read for `configsOf` only ("all", or names): a topic
 * being deleted may vanish between the listing and the describe.
 */
export async function readKafkaState(
  c: KafkaAdmin,
  configsOf: "all" | readonly string[],
): Promise<KafkaState> {
  const { admin } = c;
  const md = await c.metadata();
  const names = [...md.topics.keys()];
  const topics: Record<string, TopicState> = {};
  for (const [name, t] of md.topics)
    topics[name] = { partitions: t.leaders.length, internal: t.internal, configs: {} };
  const described = names.filter((t) => configsOf === "all" || configsOf.includes(t));
  const resources = [
    ...described.map((t) => ({ resourceType: ConfigResourceTypes.TOPIC, resourceName: t })),
    ...md.brokers.map((id) => ({
      resourceType: ConfigResourceTypes.BROKER,
      resourceName: String(id),
    })),
    { resourceType: ConfigResourceTypes.BROKER, resourceName: CLUSTER_DEFAULT },
  ];
  const [configs, groups, acls, scram, quotas] = await Promise.all([
    c.describeConfigs(resources),
    admin.listGroups(),
    admin.describeAcls({ filter: ANY_ACL }),
    c.describeScram(),
    admin.describeClientQuotas({ components: [], strict: false }),
  ]);
  const brokerConfigs: KafkaState["brokerConfigs"] = {};
  for (const r of configs) {
    const source =
      r.resourceType === ConfigResourceTypes.TOPIC
        ? ConfigSources.DYNAMIC_TOPIC_CONFIG
        : r.resourceName === CLUSTER_DEFAULT
          ? ConfigSources.DYNAMIC_DEFAULT_BROKER_CONFIG
          : ConfigSources.DYNAMIC_BROKER_CONFIG;
    const set = Object.fromEntries(
      r.configs
        .filter((x) => x.configSource === source)
        .map((x) => [x.name, x.isSensitive ? null : (x.value ?? null)]),
    );
    if (r.resourceType === ConfigResourceTypes.TOPIC) {
      const t = topics[r.resourceName];
      if (t) t.configs = set;
    } else brokerConfigs[r.resourceName] = set;
  }
  return {
    topics,
    groups: [...groups.keys()].sort(),
    acls: acls
      .flatMap((r) =>
        r.acls.map((p) => ({
          resourceType: r.resourceType,
          resourceName: r.resourceName,
          resourcePatternType: r.resourcePatternType,
          ...p,
        })),
      )
      .sort((a, b) => aclKey(a).localeCompare(aclKey(b))),
    scram,
    brokerConfigs,
    quotas: quotas
      .map((q) => ({
        entity: q.entity.map((e) => ({ entityType: e.entityType, entityName: e.entityName ?? null })),
        values: Object.fromEntries(q.values.map((v) => [v.key, v.value])),
      }))
      .sort((a, b) => quotaKey(a).localeCompare(quotaKey(b))),
  };
}

/** `name`'s entries that differ between `start` and `now`, one line each. */
function recordDiff<V>(what: string, start: Record<string, V>, now: Record<string, V>): string[] {
  const out: string[] = [];
  const show = (v: V | undefined) => (v === undefined ? "unset" : JSON.stringify(v));
  for (const k of new Set([...Object.keys(start), ...Object.keys(now)]))
    if (JSON.stringify(start[k]) !== JSON.stringify(now[k]))
      out.push(`${what} ${k}: ${show(now[k])} (at start: ${show(start[k])})`);
  return out;
}

/**
 * How `now` differs from `start`, one line per difference (empty: the same). Internal
 * topics the broker made since start are not a difference; their configs are compared
 * only where both readings have them.
 */
export function stateDifferences(start: KafkaState, now: KafkaState): string[] {
  const out: string[] = [];
  for (const [name, t] of Object.entries(now.topics))
    if (!start.topics[name] && !t.internal) out.push(`topic ${name} (not there at start)`);
  for (const [name, s] of Object.entries(start.topics)) {
    const t = now.topics[name];
    if (!t) {
      out.push(`topic ${name} is gone`);
      continue;
    }
    if (t.partitions !== s.partitions)
      out.push(`topic ${name} has ${t.partitions} partitions (at start: ${s.partitions})`);
    out.push(...recordDiff(`topic ${name} config`, s.configs, t.configs));
  }
  const startGroups = new Set(start.groups);
  out.push(...now.groups.filter((g) => !startGroups.has(g)).map((g) => `consumer group ${g}`));
  out.push(...start.groups.filter((g) => !now.groups.includes(g)).map((g) => `consumer group ${g} is gone`));
  const startAcls = new Set(start.acls.map(aclKey));
  const nowAcls = new Set(now.acls.map(aclKey));
  out.push(...[...nowAcls].filter((k) => !startAcls.has(k)).map((k) => `ACL ${k}`));
  out.push(...[...startAcls].filter((k) => !nowAcls.has(k)).map((k) => `ACL ${k} is gone`));
  out.push(...recordDiff("SCRAM user", start.scram, now.scram));
  for (const id of new Set([...Object.keys(start.brokerConfigs), ...Object.keys(now.brokerConfigs)]))
    out.push(
      ...recordDiff(
        id === CLUSTER_DEFAULT ? "cluster-wide broker config" : `broker ${id} config`,
        start.brokerConfigs[id] ?? {},
        now.brokerConfigs[id] ?? {},
      ),
    );
  const quotas = (s: KafkaState) => Object.fromEntries(s.quotas.map((q) => [quotaKey(q), q.values]));
  out.push(...recordDiff("client quota", quotas(start), quotas(now)));
  return out;
}
