// Returns a shared test Kafka cluster to its state right after start (a KafkaState read
// then): deletes the consumer groups made since (once their members have left) and the
// topics made since (and waits until the broker no longer lists them nor holds their
// logs, so the next file can create the same names at once, empty), and restores the
// ACLs, SCRAM users (a start user's credentials are set again from its known password;
// a password changed with the same mechanism and iterations is not seen: the broker
// describes only those), topic and broker configs and client quotas. On an untouched
// cluster it changes nothing. What it cannot restore it names in a KafkaResetError. It
// must never touch a broker process or anything but the cluster it is given.
import {
  ConfigResourceTypes,
  IncrementalAlterConfigOperationTypes,
  type IncrementalAlterConfigsOptions,
} from "@platformatic/kafka";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";
import { EnvError, sleep } from "./base.ts";
import { openKafkaAdmin, type KafkaAdmin } from "./kafka-admin.ts";
import { aclKey, quotaKey, readKafkaState, stateDifferences, type KafkaState } from "./kafka-state.ts";

/** The shared cluster could not be returned to its start state; `leftovers` says what is not. */
export class KafkaResetError extends EnvError {
  readonly leftovers: readonly string[];
  constructor(leftovers: readonly string[], options: { cause?: unknown } = {}) {
    super(`shared Kafka cluster not reset: ${leftovers.join("; ")}`, options);
    this.leftovers = leftovers;
  }
}

/** Groups made since start still had members when the reset gave up waiting for them to leave. */
export class KafkaGroupsBusyError extends KafkaResetError {
  readonly groups: readonly string[];
  constructor(groups: { id: string; state: string }[]) {
    super(groups.map((g) => `consumer group ${g.id} still has members (${g.state}): a consumer still runs`));
    this.groups = groups.map((g) => g.id);
  }
}

export interface ResetTarget {
  bootstrap: string;
  /** The super user's client settings. */
  admin: KafkaSecurity;
  /** The start users' passwords (to restore their SCRAM credentials). */
  passwords: Record<string, string>;
  start: KafkaState;
}

export interface ResetResult {
  /** What differed from the start state before the reset (empty: nothing was done). */
  changed: string[];
  ms: number;
}

type ConfigOp = IncrementalAlterConfigsOptions["resources"][number]["configs"][number];

const IDLE_GROUP_STATES = new Set(["empty", "dead"]);

/** Deletes the groups made since start, each once no member is left; waits for members until `deadline`. */
async function removeGroups(
  c: KafkaAdmin,
  start: KafkaState,
  now: KafkaState,
  deadline: number,
): Promise<void> {
  let left = now.groups.filter((g) => !start.groups.includes(g));
  while (left.length > 0) {
    const listed = await c.admin.listGroups();
    const idle = left.filter((g) => IDLE_GROUP_STATES.has(listed.get(g)?.state.toLowerCase() ?? "dead"));
    const present = idle.filter((g) => listed.has(g));
    if (present.length > 0) await c.admin.deleteGroups({ groups: present });
    left = left.filter((g) => !idle.includes(g));
    if (left.length === 0) return;
    if (Date.now() > deadline)
      throw new KafkaGroupsBusyError(left.map((id) => ({ id, state: listed.get(id)?.state ?? "unknown" })));
    await sleep(200);
  }
}

/** Deletes the topics made since start; returns when neither metadata nor a log dir has them. */
async function removeTopics(
  c: KafkaAdmin,
  start: KafkaState,
  now: KafkaState,
  deadline: number,
): Promise<void> {
  const doomed = Object.entries(now.topics).filter(([name, t]) => !start.topics[name] && !t.internal);
  if (doomed.length === 0) return;
  const names = doomed.map(([name]) => name);
  await c.admin.deleteTopics({ topics: names });
  const partitions = doomed.map(([name, t]) => ({ name, partitions: [...Array(t.partitions).keys()] }));
  for (;;) {
    const [md, dirs] = await Promise.all([c.metadata(), c.admin.describeLogDirs({ topics: partitions })]);
    const onDisk = new Set(
      dirs.flatMap((b) =>
        b.results.flatMap((d) => d.topics.filter((t) => t.partitions.length > 0).map((t) => t.name)),
      ),
    );
    const still = names.filter((n) => md.topics.has(n) || onDisk.has(n));
    if (still.length === 0) return;
    if (Date.now() > deadline)
      throw new KafkaResetError(still.map((n) => `topic ${n} not gone after deletion`));
    await sleep(100);
  }
}

/** The incremental config changes that turn `now` into `start` (a null start value cannot be set). */
function configOps(start: Record<string, string | null>, now: Record<string, string | null>): ConfigOp[] {
  const ops: ConfigOp[] = [];
  for (const name of Object.keys(now))
    if (!(name in start)) ops.push({ name, configOperation: IncrementalAlterConfigOperationTypes.DELETE });
  for (const [name, value] of Object.entries(start))
    if (value !== null && now[name] !== value)
      ops.push({ name, configOperation: IncrementalAlterConfigOperationTypes.SET, value });
  return ops;
}

/** Topic and broker configs back to start; the start topics that cannot be restored are returned. */
async function restoreConfigs(c: KafkaAdmin, start: KafkaState, now: KafkaState): Promise<string[]> {
  const unrestorable: string[] = [];
  const resources = [];
  for (const [name, s] of Object.entries(start.topics)) {
    const t = now.topics[name];
    if (!t || t.partitions !== s.partitions) {
      unrestorable.push(
        t
          ? `topic ${name} has ${t.partitions} partitions (at start: ${s.partitions})`
          : `topic ${name} is gone`,
      );
      continue;
    }
    const configs = configOps(s.configs, t.configs);
    if (configs.length)
      resources.push({ resourceType: ConfigResourceTypes.TOPIC, resourceName: name, configs });
  }
  for (const id of new Set([...Object.keys(start.brokerConfigs), ...Object.keys(now.brokerConfigs)])) {
    const configs = configOps(start.brokerConfigs[id] ?? {}, now.brokerConfigs[id] ?? {});
    if (configs.length)
      resources.push({ resourceType: ConfigResourceTypes.BROKER, resourceName: id, configs });
  }
  if (resources.length) await c.alterConfigs(resources);
  return unrestorable;
}

/** ACLs, SCRAM users and client quotas back to start; what cannot be restored is returned. */
async function restoreAccess(c: KafkaAdmin, t: ResetTarget, now: KafkaState): Promise<string[]> {
  const { start } = t;
  const startAcls = new Set(start.acls.map(aclKey));
  const nowAcls = new Set(now.acls.map(aclKey));
  const extraAcls = now.acls.filter((a) => !startAcls.has(aclKey(a)));
  const missingAcls = start.acls.filter((a) => !nowAcls.has(aclKey(a)));
  if (extraAcls.length) await c.admin.deleteAcls({ filters: extraAcls });
  if (missingAcls.length) await c.admin.createAcls({ creations: missingAcls });

  const unrestorable: string[] = [];
  const deletions: { user: string; mechanism: string }[] = [];
  const upserts: Record<string, string> = {};
  for (const user of new Set([...Object.keys(start.scram), ...Object.keys(now.scram)])) {
    const want = start.scram[user] ?? {};
    const have = now.scram[user] ?? {};
    if (JSON.stringify(want) === JSON.stringify(have)) continue;
    for (const mechanism of Object.keys(have)) if (!(mechanism in want)) deletions.push({ user, mechanism });
    const wanted = Object.keys(want);
    if (wanted.length === 0) continue;
    const pw = t.passwords[user];
    if (pw !== undefined && wanted.length === 1 && wanted[0] === "SCRAM-SHA-512") upserts[user] = pw;
    else unrestorable.push(`SCRAM user ${user}: ${JSON.stringify(have)} (at start: ${JSON.stringify(want)})`);
  }
  await c.alterScram(deletions, upserts);

  const startQuotas = new Map(start.quotas.map((q) => [quotaKey(q), q]));
  const entries = [];
  for (const q of now.quotas) {
    const want = startQuotas.get(quotaKey(q))?.values ?? {};
    const ops = [
      ...Object.keys(q.values)
        .filter((k) => !(k in want))
        .map((key) => ({ key, remove: true as const })),
      ...Object.entries(want)
        .filter(([k, v]) => q.values[k] !== v)
        .map(([key, value]) => ({ key, value, remove: false as const })),
    ];
    if (ops.length) entries.push({ entities: q.entity, ops });
  }
  for (const q of start.quotas)
    if (!now.quotas.some((n) => quotaKey(n) === quotaKey(q)))
      entries.push({
        entities: q.entity,
        ops: Object.entries(q.values).map(([key, value]) => ({ key, value, remove: false as const })),
      });
  if (entries.length)
    await c.admin.alterClientQuotas({
      entries: entries as Parameters<typeof c.admin.alterClientQuotas>[0]["entries"],
    });
  return unrestorable;
}

/**
 * Returns the cluster to `t.start`: everything in this module's header, then reads it
 * again until it equals the start state (ACLs and configs travel through the metadata
 * log), or throws a KafkaResetError naming what is left after `timeoutMs`.
 */
export async function resetKafka(t: ResetTarget, timeoutMs = 30_000): Promise<ResetResult> {
  const t0 = performance.now();
  const deadline = Date.now() + timeoutMs;
  const startTopics = Object.keys(t.start.topics);
  const c = openKafkaAdmin(t.bootstrap, t.admin);
  try {
    let now = await readKafkaState(c, startTopics);
    const changed = stateDifferences(t.start, now);
    if (changed.length === 0) return { changed, ms: Math.round(performance.now() - t0) };
    await removeGroups(c, t.start, now, deadline);
    await removeTopics(c, t.start, now, deadline);
    now = await readKafkaState(c, startTopics);
    const unrestorable = [...(await restoreConfigs(c, t.start, now)), ...(await restoreAccess(c, t, now))];
    if (unrestorable.length) throw new KafkaResetError(unrestorable);
    for (;;) {
      const left = stateDifferences(t.start, await readKafkaState(c, startTopics));
      if (left.length === 0) return { changed, ms: Math.round(performance.now() - t0) };
      if (Date.now() > deadline) throw new KafkaResetError(left);
      await sleep(100);
    }
  } catch (err) {
    if (err instanceof KafkaResetError) throw err;
    throw new KafkaResetError([`a request to ${t.bootstrap} failed`], { cause: err });
  } finally {
    await c.close().catch(() => undefined);
  }
}
