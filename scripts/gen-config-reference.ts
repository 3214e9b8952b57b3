// Generates docs/config-reference.md from the FencingPolicy schema (core/policy.ts): every
// field's path, type, default and allowed range from z.toJSONSchema, and its explanation
// from the comment written above the field in core/policy.ts (the single source of truth).
// `--check` exits 1 when the committed file is out of date. Writes only that one file.
// Usage: node scripts/gen-config-reference.ts [--check]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { FencingPolicySpecSchema } from "../core/policy.ts";

const ROOT = join(import.meta.dirname, "..");
const OUT = join(ROOT, "docs/config-reference.md");

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  minItems?: number;
  required?: string[];
};

/** Comments above `key: z...` lines, by "<SchemaConst>.<key>". */
function fieldComments(source: string): Map<string, string> {
  const out = new Map<string, string>();
  let schema = "";
  let pending: string[] = [];
  for (const line of source.split("\n")) {
    const decl = /^export const (\w+Schema)\b/.exec(line);
    if (decl) schema = decl[1]!;
    const comment = /^\s*\/\/ ?(.*)$/.exec(line);
    if (comment) {
      pending.push(comment[1]!);
      continue;
    }
    const field = /^\s*(\w+): z\./.exec(line) ?? /^\s*(\w+): (\w+Schema),?$/.exec(line);
    if (field && pending.length) out.set(`${schema}.${field[1]}`, pending.join(" "));
    pending = [];
  }
  return out;
}

/** Which schema constant of core/policy.ts describes the object at a path. */
const OBJECT_AT: Record<string, string> = {
  "": "FencingPolicySpecSchema",
  probe: "ProbeSettingsSchema",
  suspicion: "SuspicionSettingsSchema",
  corroboration: "CorroborationSettingsSchema",
  stormGuard: "StormGuardSettingsSchema",
  controlPlane: "ControlPlaneSettingsSchema",
  fencing: "FencingSettingsSchema",
  "fencing.nodes[]": "NodeFencingSchema",
  "fencing.nodes[].levels[]": "FencingLevelSchema",
  "fencing.nodes[].watchdog": "WatchdogLevelSchema",
  remediation: "RemediationSettingsSchema",
  timeouts: "TimeoutSettingsSchema",
  leaseHandoff: "LeaseHandoffSettingsSchema",
  "leaseHandoff.leases[]": "LeaseHandoffEntrySchema",
  "leaseHandoff.additionalLeases[]": "LeaseHandoffEntrySchema",
};

/** One line for the sections whose schema constant carries a doc comment, not a field comment. */
const SECTION_DOCS: Record<string, string> = {
  probe: "Probe settings for the event source (observer replicas).",
  suspicion: "When one observer's view turns into a suspicion (detect stage).",
  corroboration: "How suspicions become a confirmed incident (confirm stage, S2).",
  stormGuard: "S4: refuse automatic fencing when too many nodes look dead at once.",
  controlPlane: "Never fence a control-plane node if that would cost etcd its quorum.",
  fencing: "How nodes are powered off: per-node levels, tried in order (fence stage).",
  "fencing.nodes[].nodeSelector":
    "Which nodes an entry covers: by name, or by labels (all must match); an empty selector matches nothing.",
  "fencing.nodes[].nodeSelector.names": "Node names this entry covers.",
  "fencing.nodes[].nodeSelector.matchLabels":
    "Labels a node must all carry; only keys under node-restriction.kubernetes.io/ (a kubelet cannot set those on its own Node), others are refused.",
  "fencing.nodes[].levels":
    "Ways to power these nodes off, tried in order: the next level is the escalation.",
  "fencing.nodes[].watchdog":
    "The watchdog level, after the BMC levels or alone (opt-in): once every BMC level failed unanswered, the node counts as fenced after the fencing replica watched it quiet for renewGraceMs + its reported watchdog timeout + marginMs, and only if its agent reported the watchdog armed for the incident's boot ([design.md](design.md#watchdog-fencing)).",
  "fencing.nodes[].levels[].driver":
    "BMC protocol: Redfish, IPMI (lanplus), or a ClusterLabs fence agent (needs the fence-agents image).",
  remediation: "How workloads are released after a confirmed power-off (remediate-workloads stage).",
  lookAfter:
    "The look after the power-off (fence's reconciler, [safety.md](safety.md#the-look-after-the-power-off)); kept in core/policy-look-after.ts.",
  "lookAfter.windowMs":
    "How long after a read-back Off fence keeps looking for the node's heartbeat with the incident's boot ID (a renewal proves the BMC's Off false: alarm BMCLied, then the next level). Unit: ms. Default 300000 (5 min); 0 turns it off. Longer catches a node that resumes late, at one view read per reconcile interval per fenced incident while it lasts.",
  leaseHandoff:
    "Leader hand-off after a proven power-off (fence; [safety.md](safety.md#leader-hand-off-after-a-proven-power-off)): the Leases whose holder on the fenced node fence releases as client-go's own release would, so a standby leads at its next retry; kept in core/policy-lease-handoff.ts.",
  timeouts:
    "The timeout chain of a fencing round: BMC call < level timeoutMs ≤ round (powerOffTimeoutMs) < round + 5000 ms recording margin < fencing Lease. Checked at apply (CEL) and when read ([tuning.md](tuning.md#timeouts-that-add-up)).",
};

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(" | ");
  const t = Array.isArray(s.type) ? s.type.join(" | ") : (s.type ?? "any");
  if (t === "array") return `list of ${s.items ? typeOf(s.items) : "any"}`;
  if (t === "object" && s.additionalProperties && typeof s.additionalProperties === "object" && !s.properties)
    return `map of ${typeOf(s.additionalProperties)}`;
  return t;
}

function range(s: JsonSchema): string {
  const parts: string[] = [];
  if (s.minimum !== undefined && s.maximum !== undefined) parts.push(`${s.minimum} … ${s.maximum}`);
  else if (s.minimum !== undefined) parts.push(`≥ ${s.minimum}`);
  else if (s.maximum !== undefined) parts.push(`≤ ${s.maximum}`);
  if (s.minLength) parts.push(`length ≥ ${s.minLength}`);
  if (s.minItems) parts.push(`items ≥ ${s.minItems}`);
  return parts.join(", ");
}

function fmtDefault(s: JsonSchema): string {
  if (s.default === undefined) return "";
  const v = JSON.stringify(s.default);
  return v === "{}" ? "(all defaults)" : `\`${v}\``;
}

interface Row {
  path: string;
  type: string;
  def: string;
  range: string;
  required: boolean;
  doc: string;
}

function walk(s: JsonSchema, path: string, comments: Map<string, string>, rows: Row[]): void {
  const owner = OBJECT_AT[path];
  for (const [key, child] of Object.entries(s.properties ?? {})) {
    const p = path ? `${path}.${key}` : key;
    rows.push({
      path: p,
      type: typeOf(child),
      def: fmtDefault(child),
      range: range(child),
      required: (s.required ?? []).includes(key) && child.default === undefined,
      doc: (owner && comments.get(`${owner}.${key}`)) || (SECTION_DOCS[p] ?? ""),
    });
    if (child.properties) walk(child, p, comments, rows);
    if (child.items?.properties) walk(child.items, `${p}[]`, comments, rows);
    if (child.items && !child.items.properties && child.items.type === "object")
      walk(child.items, `${p}[]`, comments, rows);
  }
}

export function generate(): string {
  const schema = z.toJSONSchema(FencingPolicySpecSchema, {
    io: "input",
    unrepresentable: "any",
  }) as JsonSchema;
  const comments = new Map([
    ...fieldComments(readFileSync(join(ROOT, "core/policy.ts"), "utf8")),
    ...fieldComments(readFileSync(join(ROOT, "core/policy-watchdog.ts"), "utf8")),
    ...fieldComments(readFileSync(join(ROOT, "core/policy-lease-handoff.ts"), "utf8")),
  ]);
  const rows: Row[] = [];
  walk(schema, "", comments, rows);
  const esc = (t: string) => t.replace(/\|/g, "\\|");
  const lines = [
    "# FencingPolicy configuration reference",
    "",
    "<!-- Generated by scripts/gen-config-reference.ts from core/policy.ts. Do not edit by hand;",
    "     run `node scripts/gen-config-reference.ts` after changing the schema. -->",
    "",
    "One cluster-scoped `FencingPolicy` (`fastfence.io/v1alpha1`) configures the whole pipeline.",
    "Every field is optional unless marked required; a missing field takes its default. Times",
    "are in milliseconds. Which of these sit on the critical path, and how to tune them",
    "together, is in [tuning.md](tuning.md). An example: `knative/examples/fencingpolicy.yaml`.",
    "",
    "| field (`spec.…`) | type | default | allowed | meaning |",
    "|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| \`${r.path}\`${r.required ? " (required)" : ""} | ${esc(r.type)} | ${esc(r.def)} | ${esc(r.range)} | ${esc(r.doc)} |`,
    ),
    "",
  ];
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = generate();
  if (process.argv.includes("--check")) {
    let current = "";
    try {
      current = readFileSync(OUT, "utf8");
    } catch {
      /* missing counts as out of date */
    }
    if (current !== text) {
      console.error("docs/config-reference.md is out of date: run node scripts/gen-config-reference.ts");
      process.exit(1);
    }
  } else {
    writeFileSync(OUT, text);
    console.log(`wrote ${OUT}`);
  }
}
