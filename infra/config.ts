// Process configuration of a function or event-source replica, from environment
// variables (what Knative and Deployments set), validated with zod. Every field: unit,
// default, trade-off. A bad value is an error naming the variable, never a silent
// default; so is a combination that breaks the timeout chain (docs/tuning.md). Never holds secrets (BMC credentials live in Secrets, read per action).
import { hostname } from "node:os";
import { z } from "zod";
import type { Self } from "../core/decision.ts";
import { InvalidInputError } from "../core/errors.ts";
import { parseKubeEndpointsSetting } from "../core/kube-endpoints.ts";
import { ROUND_RECORD_MARGIN_MS } from "../core/policy.ts";
import { AGENT_DEFAULT_RENEW_GRACE_MS } from "../core/watchdog.ts";
import { SAMPLERS } from "./tracing.ts";

const ms = (def: number) => z.coerce.number().int().min(1).default(def);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function splitList(v: string | undefined): string[] {
  return (v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

export const RuntimeConfigSchema = z
  .object({
    // Namespace of NodeFence incidents, fencing Leases and BMC Secrets. Default "fastfence-system".
    FASTFENCE_NAMESPACE: z.string().min(1).default("fastfence-system"),
    // Kafka bootstrap servers, "host:port,...". Required for --kafka, trace and the event source.
    FASTFENCE_KAFKA_BROKERS: z.string().optional(),
    // This replica's id: the pod name. Default: the host name. Must be unique per replica
    // (it is the Lease holder identity and the event `source`).
    FASTFENCE_REPLICA: z.string().min(1).default(hostname()),
    // Pod name from the Downward API; used as FASTFENCE_REPLICA when that is not set.
    FASTFENCE_POD_NAME: z.string().min(1).optional(),
    // Publish every event to this one topic instead of the catalog's per-stage topics
    // (Knative mode: the Kafka Broker's topic); `run --kafka` also consumes from it (each
    // function skips the types it does not handle). Dead letters keep their own topic.
    // Default: unset, catalog topics.
    FASTFENCE_KAFKA_TOPIC: z.string().min(1).optional(),
    // Knative sink URL (the Broker) for events beyond the one an HTTP reply carries.
    // Set by Knative SinkBinding or the manifests. Default: unset (then Kafka, if configured).
    K_SINK: z.url().optional(),
    // The node this replica runs on (Downward API spec.nodeName). Required for the event
    // source; fence uses it to leave the rounds for its own node to replicas elsewhere.
    FASTFENCE_NODE_NAME: z.string().optional(),
    // The Kubernetes identity this replica acts as, written as confirmedBy (S6). Default
    // "system:serviceaccount:<namespace>:fastfence-<function>".
    FASTFENCE_IDENTITY: z.string().optional(),
    // Identities allowed to confirm incidents, comma-separated (fence acts only on those, S6).
    // Default "system:serviceaccount:<namespace>:fastfence-confirm".
    FASTFENCE_TRUSTED_CONFIRMERS: z.string().optional(),
    // API servers a request may fail over to when the kubeconfig's server (in a pod, the
    // `kubernetes` Service address) does not connect or answer within FASTFENCE_KUBE_TIMEOUT_MS
    // (stall source 4): comma-separated https:// URLs (same CA and credentials) and/or `auto`:
    // every API server the `default/kubernetes` EndpointSlice lists, read by name in the
    // background every 10 s and soon after a failover (needs `get` on it, RBAC
    // api-endpoints.yaml). A request that connected and got an HTTP answer is never retried.
    // Default: unset, the kubeconfig's server only. The shipped manifests set `auto`: the
    // Service keeps balancing new connections to a dead API server for up to ~25 s (its lease
    // TTL 15 s + reconcile 10 s); with `auto` a request reaches a live one after one timeout.
    // A discovered address's certificate is checked as `kubernetes.default.svc` (or the
    // kubeconfig's tls-server-name): every API server's cert for the Service carries that
    // name, node IPs need not be in it; a configured URL is checked as itself. Trade-offs:
    // one GET of the slice per replica every 10 s, and a new API server is used only once
    // the slice lists it and the next read saw it (≤ 10 s).
    FASTFENCE_KUBE_ENDPOINTS: z
      .string()
      .optional()
      .superRefine((v, ctx) => {
        try {
          parseKubeEndpointsSetting(v);
        } catch (err) {
          ctx.addIssue({
            code: "custom",
            message: (err as Error).message.replace(/^FASTFENCE_KUBE_ENDPOINTS: /, ""),
          });
        }
      }),
    // Deadline of one Kubernetes API request (per endpoint), ms. Default 2000. Shorter fails
    // over sooner. At most 2500: the status writes before and after a fencing round must fit
    // the round's fixed 5000 ms recording margin (core/policy.ts ROUND_RECORD_MARGIN_MS), and
    // below FASTFENCE_HANDLER_TIMEOUT_MS.
    FASTFENCE_KUBE_TIMEOUT_MS: ms(2000),
    // Deadline of one handler run, ms. Default 15000. Above FASTFENCE_KUBE_TIMEOUT_MS. A
    // fencing round is not bounded by it: its handler's deadline is moved to the round's own
    // (the policy's powerOffTimeoutMs + 5000 ms) when the power-off starts.
    FASTFENCE_HANDLER_TIMEOUT_MS: ms(15_000),
    // Sender authentication of the HTTP runtime (Knative deliveries, infra/runtime/http-auth.ts).
    // "tokenreview" (default): every POST must carry `Authorization: Bearer <token>`, a token
    // bound to FASTFENCE_HTTP_AUDIENCE that the API server accepts (TokenReview); this is
    // what Knative Eventing sends with its `authentication-oidc` feature on. "none": no
    // check, any pod that reaches the Service can deliver (forge) events; logged as a
    // warning at every start. Use it only where Knative OIDC is not available, with the
    // NetworkPolicies of knative/base/network (docs/deploy-knative.md).
    FASTFENCE_HTTP_AUTH: z.enum(["tokenreview", "none"]).default("tokenreview"),
    // The audience a delivery's token must be bound to. Default
    // "serving.knative.dev/service/<FASTFENCE_NAMESPACE>/<function>", Knative's audience
    // format (<group>/<kind>/<namespace>/<name>) for the function's Knative Service; each
    // Trigger's spec.subscriber.audience must be the same string. One audience per function,
    // so a token issued for one receiver is refused by every other.
    FASTFENCE_HTTP_AUDIENCE: z.string().min(1).optional(),
    // Usernames allowed to deliver, comma-separated (the Triggers' OIDC identities,
    // "system:serviceaccount:<ns>:<trigger>-oidc-eventing.knative.dev-trigger"); others get
    // 403. Default: unset, any subject with a valid token for the audience. That is weaker:
    // any pod can mount a projected token for any audience, so without this list the
    // audience stops replays of tokens issued for other receivers but not a pod that asks
    // for this audience itself. The manifests set the list.
    FASTFENCE_HTTP_ALLOWED_SUBJECTS: z.string().optional(),
    // How long a successful TokenReview is reused for the same token, seconds, 0-60. Default
    // 30; never past the token's own `exp` claim. Longer saves API calls (Knative reuses a
    // token for its lifetime) but a revoked token (deleted ServiceAccount) is accepted that
    // much longer. Refusals are never cached. 0: every request is reviewed.
    FASTFENCE_HTTP_AUTH_CACHE_SECONDS: z.coerce.number().int().min(0).max(60).default(30),
    // Deadline of one TokenReview (over all API endpoints), ms. Default 1500, under the
    // Triggers' 2 s attempt timeout. The API server not answering in time gives 503
    // (Knative redelivers), never an unauthenticated delivery.
    FASTFENCE_HTTP_AUTH_TIMEOUT_MS: ms(1500),
    // A file holding a bearer token sent with every post to K_SINK (a projected ServiceAccount
    // token with the Broker's audience, e.g. eventing.knative.dev/broker/<ns>/<broker>): the
    // Broker's receiver requires one when Knative's authentication-oidc is enabled. Re-read
    // for every post, so the kubelet's rotation is picked up. Default: unset, no token.
    FASTFENCE_SINK_TOKEN_FILE: z.string().min(1).optional(),
    // BMC health check of the fence stage (infra/fence/health.ts, Pacemaker's stonith
    // monitor): every interval each fence replica logs in to every node's fencing levels
    // and reads the power state (never changes it), exporting fastfence_bmc_up and
    // fastfence_bmc_check_result (auth-failed: the BMC rejects the Secret's credentials).
    // Unit: ms. Default 60000; 0 = off. Shorter finds a wrong password or a dead BMC sooner
    // (an alert fires within about one interval); longer loads the BMCs less: each check is
    // one login and one status read per level and fence replica, and a BMC that locks an
    // account after repeated failed logins counts a rejected check as one.
    FASTFENCE_BMC_HEALTH_INTERVAL_MS: z.coerce.number().int().min(0).default(60_000),
    // Kafka consumer session timeout, ms. Default 6000 (broker minimum by default). Only
    // matters in "shared" group mode; see FASTFENCE_GROUP_MODE.
    FASTFENCE_KAFKA_SESSION_TIMEOUT_MS: ms(6000),
    // Hedged publishing, ms (infra/bus/kafkajs-bus.ts): a record not acknowledged within
    // this time is also sent to another partition. Default 300; 0 = off. Lower gets past a
    // dead partition leader sooner, at the cost of more duplicate records.
    FASTFENCE_KAFKA_HEDGE_MS: z.coerce.number().int().min(0).default(300),
    // ISR keepalive, ms (events/keepalive.ts): while the Kafka client reports a broker it
    // cannot reach, and for 20 s after, a Kafka-runtime replica writes one tiny record to
    // every partition of its output topics this often. A partition leader drops a dead
    // broker from its ISR only after a record arrives that the dead follower never fetches,
    // plus replica.lag.time.max.ms; on an idle topic that wait falls on the incident's next
    // event, once per pipeline hop (measured: 1.5 s a hop on the shipped broker settings).
    // With keepalives every ISR shrinks together, soon after the death. Default 0 = off; the
    // shipped manifests set 1000 for the critical stages. Lower shrinks the ISRs a little
    // sooner; higher writes fewer records during the trouble (partitions × replicas per
    // interval, per output topic; consumers skip them unread).
    FASTFENCE_KAFKA_KEEPALIVE_MS: z.coerce.number().int().min(0).max(60_000).default(0),
    // Longest age of the Kafka client's partition-leader map, ms. Default 1000. After a
    // broker dies, consumers keep failing on its partitions (and pause all their fetches)
    // until the next refresh; higher means a longer stall, lower more Metadata requests.
    FASTFENCE_KAFKA_METADATA_MAX_AGE_MS: ms(1000),
    // "all" (default: durable through a broker loss; acks wait ~broker.session.timeout.ms
    // after a broker death) or "leader" (faster through a broker death, may lose a record
    // acknowledged just before its leader died).
    FASTFENCE_KAFKA_ACKS: z.enum(["all", "leader"]).default("all"),
    // The Kafka client library behind the bus (infra/bus/kafka-bus.ts): "kafkajs" (default;
    // the client the customer's design names, unmaintained, with failover fixes of its
    // internals) or "platformatic" (@platformatic/kafka, maintained; every connect,
    // request and metadata age bounded by the same settings). Same contract and settings;
    // the measured comparison through a frozen and a killed broker is in docs/design.md.
    FASTFENCE_KAFKA_CLIENT: z.enum(["kafkajs", "platformatic"]).default("kafkajs"),
    // ---- Kafka transport security (infra/bus/kafka-security.ts; docs/deploy-knative.md).
    // Without TLS and a client identity the bus refuses to start, naming what is missing,
    // unless FASTFENCE_KAFKA_INSECURE=true. Secrets are read from files (Secret mounts),
    // never from variables, and never logged.
    // PEM file of the CA that signed the brokers' certificates (Strimzi: the cluster CA
    // Secret's ca.crt). Required for TLS. Default: unset.
    FASTFENCE_KAFKA_CA_FILE: z.string().min(1).optional(),
    // SCRAM-SHA-512 user name (the KafkaUser's name, e.g. fastfence-detect). Default: unset.
    FASTFENCE_KAFKA_USERNAME: z.string().min(1).optional(),
    // File holding the SCRAM password (Strimzi: the user Secret's `password` key). Required
    // with FASTFENCE_KAFKA_USERNAME. Default: unset.
    FASTFENCE_KAFKA_PASSWORD_FILE: z.string().min(1).optional(),
    // Client certificate and key (PEM) for mutual TLS instead of, or besides, SCRAM
    // (Strimzi tls users: user.crt, user.key). Both or neither. Default: unset.
    FASTFENCE_KAFKA_CERT_FILE: z.string().min(1).optional(),
    FASTFENCE_KAFKA_KEY_FILE: z.string().min(1).optional(),
    // "true": allow a plaintext, unauthenticated connection when no TLS/SASL settings are
    // given (a local broker only); logged as a warning at every start. Default "false".
    FASTFENCE_KAFKA_INSECURE: z.enum(["true", "false"]).default("false"),
    // "each-replica" (default): every replica reads everything, a dead replica stalls
    // nothing; "shared": one group per function, less duplicate work, stalls up to the
    // session timeout when a member dies.
    FASTFENCE_GROUP_MODE: z.enum(["each-replica", "shared"]).default("each-replica"),
    // Name of the FencingPolicy to use. Default "default".
    FASTFENCE_POLICY: z.string().min(1).default("default"),
    // Namespaces holding metal3 BareMetalHosts, comma-separated (e.g. "openshift-machine-api").
    // Default: unset, every BareMetalHost list (metal3 discovery by host uid, releasing an
    // ending incident's reboot.metal3.io hold) is one cluster-wide list. Set: one list per
    // namespace, so a namespaced Role suffices (the manifests grant only that), but hosts in
    // other namespaces are never seen. Reading one host by namespace/name is unaffected.
    FASTFENCE_METAL3_NAMESPACES: z
      .string()
      .refine((v) => {
        const list = splitList(v);
        return list.length > 0 && list.every((n) => DNS_LABEL.test(n));
      }, "must be comma-separated namespace names")
      .optional(),
    // ---- The node's watchdog (event source only; source/watchdog-agent.ts, docs/design.md
    // "Watchdog fencing", docs/deploy-openshift.md). Where the node's watchdog device is:
    // /dev/watchdog (hardware or softdog) as the DaemonSet mounts it, e.g. /host/dev/watchdog.
    // It arms nothing by itself: the event source opens (arms) and pets it only while the
    // FencingPolicy's entry for its node has the watchdog level (fencing.nodes[].watchdog),
    // and only after the first acknowledged heartbeat renewal; elsewhere it reports "not
    // armed" (requested: false) and never opens it. When the policy stops asking, "not armed"
    // is recorded on the heartbeat Lease before the device is disarmed. One that cannot be
    // opened is reported as not armed, with the reason, on the heartbeat Lease (the
    // FencingPolicy's WatchdogsArmed condition, fastfence_watchdog_armed). Default: unset,
    // no device: the node is never fenced by the watchdog level.
    FASTFENCE_WATCHDOG_DEVICE: z.string().min(1).optional(),
    // What the device's timeout must be, ms: a device whose sysfs timeout
    // (/sys/class/watchdog/watchdogN/timeout) differs is not armed, and so is one with no
    // sysfs timeout. Never the reported timeout (that is the device's own; nor is the Node
    // annotation fastfence.io/watchdog-timeout-ms, which likewise only refuses). With
    // FASTFENCE_WATCHDOG_EMULATION it is the emulated device's timeout, and required. Set the
    // device's with its driver (e.g. softdog.soft_margin). Default: unset. 1000-600000.
    FASTFENCE_WATCHDOG_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600_000).optional(),
    // The lab's emulated watchdog (lab/watchdog.ts): "lab-fifo" accepts a FIFO as the device,
    // with FASTFENCE_WATCHDOG_TIMEOUT_MS as its timeout. Only the lab sets it
    // (lab/node-agent.ts); no shipped overlay may (test/unit/infra/watchdog-emulation-overlays.test.ts):
    // on a real node it would let a FIFO, which resets nothing, pass for a watchdog. Default:
    // unset: only a watchdog character device with a sysfs timeout is armed.
    FASTFENCE_WATCHDOG_EMULATION: z.enum(["lab-fifo"]).optional(),
    // How long after the last acknowledged heartbeat renewal (or a majority's vouches) the
    // agent still pets, ms. Default 5000; at least twice the policy's
    // probe.heartbeatIntervalMs (checked on every policy read: below it the agent does not
    // arm, and says why). Shorter resets an isolated node sooner;
    // every deciding replica waits this + the timeout + its margin before it counts the
    // node as reset, so it adds to the watchdog level's time to release. The agent states it
    // in its report, and fence waits for the longer of it and the policy's renewGraceMs.
    FASTFENCE_WATCHDOG_RENEW_GRACE_MS: ms(AGENT_DEFAULT_RENEW_GRACE_MS),
    // How often the agent pets, ms. Default 1000; must be below a third of the timeout.
    FASTFENCE_WATCHDOG_PET_INTERVAL_MS: ms(1000),
    // Port of the event source's vouch endpoint on the node network (source/vouch-server.ts):
    // it vouches there for peers whose own heartbeat renewal fails (recording each vouch on
    // its heartbeat Lease first) and, with a watchdog, asks its peers on the same port.
    // Default 29465; 0 = no vouching (a node that loses the API then stops petting even when
    // a majority of its peers could vouch for it).
    FASTFENCE_WATCHDOG_VOUCH_PORT: z.coerce.number().int().min(0).max(65535).default(29465),
    // ---- Tracing (infra/tracing.ts; docs/observability.md). The standard OpenTelemetry
    // variables. Off unless one of the two endpoints is set: then every stage's handling
    // of an event, every resync and every BMC call is a span, exported over OTLP/HTTP
    // (protobuf). Headers and TLS files (OTEL_EXPORTER_OTLP_HEADERS, ..._CERTIFICATE) are
    // read by the exporter from the process environment.
    // Base URL of an OTLP/HTTP receiver; traces go to <url>/v1/traces. Default: unset (off).
    OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
    // Full URL for traces (used as is); wins over OTEL_EXPORTER_OTLP_ENDPOINT. Default: unset.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url().optional(),
    // "true": no tracing even with an endpoint set. Default "false".
    OTEL_SDK_DISABLED: z.enum(["true", "false"]).optional(),
    // Sampler. Default "parentbased_always_on": every incident is traced (the event source
    // mints sampled traceparents). "traceidratio" with OTEL_TRACES_SAMPLER_ARG keeps a
    // fraction of incidents, whole: every stage decides on the same trace id.
    OTEL_TRACES_SAMPLER: z.enum(SAMPLERS).optional(),
    // Ratio for the *traceidratio samplers, 0..1. Default 1.
    OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
    // Delay between two batch exports, ms. Default 5000. Spans are buffered and exported in
    // the background; a stopping replica exports what it holds.
    OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().min(0).optional(),
  })
  .superRefine((c, ctx) => {
    for (const issue of envChainIssues(c)) ctx.addIssue({ code: "custom", ...issue });
  });
export type RuntimeConfig = z.infer<typeof RuntimeConfigSchema>;

/** Where the environment breaks the timeout chain (docs/tuning.md), naming the variables. */
function envChainIssues(c: {
  FASTFENCE_KUBE_TIMEOUT_MS: number;
  FASTFENCE_HANDLER_TIMEOUT_MS: number;
}): { path: string[]; message: string }[] {
  const kube = c.FASTFENCE_KUBE_TIMEOUT_MS;
  const out: { path: string[]; message: string }[] = [];
  if (!(kube < c.FASTFENCE_HANDLER_TIMEOUT_MS))
    out.push({
      path: ["FASTFENCE_KUBE_TIMEOUT_MS"],
      message: `must be below FASTFENCE_HANDLER_TIMEOUT_MS (${kube} ms ≥ ${c.FASTFENCE_HANDLER_TIMEOUT_MS} ms): a handler makes at least one API request`,
    });
  if (2 * kube > ROUND_RECORD_MARGIN_MS)
    out.push({
      path: ["FASTFENCE_KUBE_TIMEOUT_MS"],
      message: `must be at most ${ROUND_RECORD_MARGIN_MS / 2} ms (is ${kube}): the status writes before and after a fencing round must fit its ${ROUND_RECORD_MARGIN_MS} ms recording margin, inside the fencing Lease`,
    });
  return out;
}

export function loadRuntimeConfig(env: Record<string, string | undefined> = process.env): RuntimeConfig {
  const picked = Object.fromEntries(
    Object.keys(RuntimeConfigSchema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]),
  );
  const r = RuntimeConfigSchema.safeParse(picked);
  if (!r.success)
    throw new InvalidInputError(
      "FF_INVALID_CONFIG",
      "invalid environment",
      r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
    );
  if (!env.FASTFENCE_REPLICA && r.data.FASTFENCE_POD_NAME)
    r.data.FASTFENCE_REPLICA = r.data.FASTFENCE_POD_NAME;
  return r.data;
}

export function identityFor(cfg: RuntimeConfig, component: string): string {
  return cfg.FASTFENCE_IDENTITY ?? `system:serviceaccount:${cfg.FASTFENCE_NAMESPACE}:fastfence-${component}`;
}

/** Who a stage's replica is in its decisions: identity, replica name, and its node when known. */
export function selfFor(cfg: RuntimeConfig, component: string): Self {
  return {
    identity: identityFor(cfg, component),
    replica: cfg.FASTFENCE_REPLICA,
    ...(cfg.FASTFENCE_NODE_NAME ? { node: cfg.FASTFENCE_NODE_NAME } : {}),
  };
}

export function trustedConfirmers(cfg: RuntimeConfig): string[] {
  const list = splitList(cfg.FASTFENCE_TRUSTED_CONFIRMERS);
  return list.length ? list : [`system:serviceaccount:${cfg.FASTFENCE_NAMESPACE}:fastfence-confirm`];
}

/** A Kafka-runtime replica's own settings (infra/runtime/kafka-runtime.ts KafkaRuntimeConfig, but the dispatch). */
export function kafkaRuntimeSettings(c: RuntimeConfig): {
  groupMode: RuntimeConfig["FASTFENCE_GROUP_MODE"];
  replica: string;
  keepaliveMs: number;
} {
  return {
    groupMode: c.FASTFENCE_GROUP_MODE,
    replica: c.FASTFENCE_REPLICA,
    keepaliveMs: c.FASTFENCE_KAFKA_KEEPALIVE_MS,
  };
}

/** Namespaces to list BareMetalHosts in; undefined: cluster-wide (FASTFENCE_METAL3_NAMESPACES unset). */
export function metal3Namespaces(cfg: RuntimeConfig): string[] | undefined {
  const list = splitList(cfg.FASTFENCE_METAL3_NAMESPACES);
  return list.length ? list : undefined;
}

/** The audience a function's HTTP deliveries must carry (FASTFENCE_HTTP_AUDIENCE or Knative's format). */
export function httpAudience(cfg: RuntimeConfig, fn: string): string {
  return cfg.FASTFENCE_HTTP_AUDIENCE ?? `serving.knative.dev/service/${cfg.FASTFENCE_NAMESPACE}/${fn}`;
}

/** Usernames allowed to deliver over HTTP; empty: any authenticated subject with the audience. */
export function httpAllowedSubjects(cfg: RuntimeConfig): string[] {
  return splitList(cfg.FASTFENCE_HTTP_ALLOWED_SUBJECTS);
}
