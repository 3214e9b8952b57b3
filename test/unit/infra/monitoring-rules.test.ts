// The PrometheusRule of knative/components/monitoring against the code: every metric name
// its expressions use is one fastfence exports (the registries createFunctionMetrics and
// createSourceMetrics build, histograms with their _bucket/_sum/_count series), every alert
// has a summary, a description and a runbook_url naming a section of docs/troubleshooting.md
// that exists, and test/monitoring/alerts-test.yaml has a firing and a quiet case for each
// alert (promtool runs them: test/integration/deploy-monitoring-rules.test.ts). Also: the
// default process metrics carry one prefix. Reads files and builds registries only.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import { describe, expect, it } from "vitest";
import { createFunctionMetrics, createSourceMetrics } from "../../../infra/metrics.ts";
import { render } from "../../../harness/kustomize.ts";

const ROOT = join(import.meta.dirname, "../../..");

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function rules(): Rule[] {
  const objs = render(join(ROOT, "knative/components/monitoring"));
  const pr = objs.filter((o) => o.kind === "PrometheusRule");
  expect(pr).toHaveLength(1);
  return (pr[0]!.spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
}

/** Every series name fastfence exports, histograms expanded to their series. */
async function exportedNames(): Promise<Set<string>> {
  const out = new Set<string>();
  for (const registry of [createFunctionMetrics().registry, createSourceMetrics().registry]) {
    for (const m of await registry.getMetricsAsJSON()) {
      out.add(m.name);
      if (String(m.type) === "histogram") for (const s of ["_bucket", "_sum", "_count"]) out.add(m.name + s);
    }
  }
  return out;
}

const KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "and",
  "or",
  "unless",
  "offset",
]);

/**
 * The metric names a PromQL expression selects: identifiers left once strings, label
 * matchers, grouping clauses and ranges are removed, that are neither keywords nor
 * function or aggregation names (followed by "(").
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\[[^\]]*\]/g, " ");
  const names: string[] = [];
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const rest = stripped.slice(m.index! + m[0].length);
    if (KEYWORDS.has(m[0]) || /^\s*\(/.test(rest)) continue;
    if (/^\d/.test(m[0])) continue;
    names.push(m[0]);
  }
  return names;
}

describe("monitoring: the PrometheusRule", () => {
  it("parses metric names out of expressions", () => {
    expect(
      metricNames(
        'sum by (function, code) (increase(fastfence_events_dead_lettered_total{code="x"}[10m])) > 0',
      ),
    ).toEqual(["fastfence_events_dead_lettered_total"]);
    expect(metricNames("max(a_b) / on(node) group_left c:d > 1")).toEqual(["a_b", "c:d"]);
  });

  it("uses only metrics the code exports", async () => {
    const exported = await exportedNames();
    const used = new Set(rules().flatMap((r) => metricNames(r.expr)));
    expect(used.size).toBeGreaterThan(5);
    expect([...used].filter((n) => !exported.has(n))).toEqual([]);
  });

  it("has the alerts an SRE needs, each with its annotations and a runbook section", () => {
    const alerts = rules().filter((r) => r.alert);
    expect(alerts.map((a) => a.alert).sort()).toEqual([
      "FastfenceBmcCredentialsRejected",
      "FastfenceBmcUnreachable",
      "FastfenceDeadLetters",
      "FastfenceEventSourceMissing",
      "FastfenceFencingFailed",
      "FastfenceIncidentNotProgressing",
      "FastfencePolicyInvalid",
      "FastfenceStormGuardEngaged",
    ]);
    const doc = readFileSync(join(ROOT, "docs/troubleshooting.md"), "utf8");
    const anchors = new Set(
      [...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, "")
          .replace(/ /g, "-"),
      ),
    );
    for (const a of alerts) {
      expect(a.labels?.severity, a.alert).toMatch(/^(critical|warning)$/);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
      const url = a.annotations?.runbook_url ?? "";
      expect(url, a.alert).toBe(`docs/troubleshooting.md#${a.alert!.toLowerCase()}`);
      expect(anchors.has(a.alert!.toLowerCase()), `docs/troubleshooting.md has no section ${a.alert}`).toBe(
        true,
      );
    }
  });

  it("has a promtool test where each alert fires and one where it stays quiet", () => {
    const tests = load(readFileSync(join(ROOT, "test/monitoring/alerts-test.yaml"), "utf8")) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    const cases = tests.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const a of rules().filter((r) => r.alert)) {
      const mine = cases.filter((c) => c.alertname === a.alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${a.alert} fires`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${a.alert} stays quiet`,
      ).toBe(true);
    }
  });
});

describe("metrics: names", () => {
  it("default process metrics carry one fastfence_ prefix, not a doubled one", async () => {
    const names = [...(await exportedNames())];
    expect(names).toContain("fastfence_process_cpu_seconds_total");
    expect(names).toContain("fastfence_nodejs_heap_size_used_bytes");
    expect(names.filter((n) => n.includes("process_process") || !n.startsWith("fastfence_"))).toEqual([]);
  });
});
