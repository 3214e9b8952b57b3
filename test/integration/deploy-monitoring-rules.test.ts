// Needs real kustomize, promtool: alert expressions evaluated by Prometheus's rule engine.
// make test-deploy: the PrometheusRule of knative/components/monitoring through the real
// promtool (built from the Prometheus Go module by `make setup`, tools/promtool): its rule
// groups, as the Prometheus Operator hands them to Prometheus, pass `promtool check rules`,
// and `promtool test rules` passes test/monitoring/alerts-test.yaml (for every alert a
// series it fires on and one it stays quiet on). A rule with a changed threshold fails those
// tests, so they do check the expressions. Works in a temporary folder; starts no server.
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { dump } from "js-yaml";
import { afterAll, describe, expect, it } from "vitest";
import { render } from "../../harness/kustomize.ts";

const pexec = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const PROMTOOL = join(ROOT, ".cache/bin/promtool");
const dir = mkdtempSync(join(tmpdir(), "fastfence-promtool-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The PrometheusRule's spec: the rule file Prometheus gets from the operator. */
function ruleFile(): { groups: { name: string; rules: { alert?: string; expr: string }[] }[] } {
  const [pr] = render(join(ROOT, "knative/components/monitoring")).filter((o) => o.kind === "PrometheusRule");
  return structuredClone(pr!.spec) as ReturnType<typeof ruleFile>;
}

async function promtool(...args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const r = await pexec(PROMTOOL, args, { cwd: dir, timeout: 60_000 });
    return { ok: true, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

describe("monitoring: the PrometheusRule through promtool", () => {
  it("promtool is built (make setup)", async () => {
    expect(existsSync(PROMTOOL), `${PROMTOOL} missing: run make setup (scripts/setup.sh promtool)`).toBe(
      true,
    );
    expect((await promtool("--version")).out).toMatch(/promtool, version/);
  });

  it("passes promtool check rules", async () => {
    const rules = ruleFile();
    writeFileSync(join(dir, "rules.yaml"), dump(rules));
    const r = await promtool("check", "rules", "rules.yaml");
    expect(r.out).toMatch(/SUCCESS: 8 rules found/);
    expect(r.ok).toBe(true);
  });

  it("passes promtool test rules: every alert fires on one series and stays quiet on another", async () => {
    writeFileSync(join(dir, "rules.yaml"), dump(ruleFile()));
    copyFileSync(join(ROOT, "test/monitoring/alerts-test.yaml"), join(dir, "alerts-test.yaml"));
    const r = await promtool("test", "rules", "alerts-test.yaml");
    expect(r.out, r.out).toMatch(/SUCCESS/);
    expect(r.ok).toBe(true);
  });

  it("fails those tests when an alert's threshold changes", async () => {
    const rules = ruleFile();
    const rule = rules.groups
      .flatMap((g) => g.rules)
      .find((x) => x.alert === "FastfenceIncidentNotProgressing")!;
    rule.expr = rule.expr.replace("> 300", "> 3000");
    writeFileSync(join(dir, "rules.yaml"), dump(rules));
    copyFileSync(join(ROOT, "test/monitoring/alerts-test.yaml"), join(dir, "alerts-test.yaml"));
    const r = await promtool("test", "rules", "alerts-test.yaml");
    expect(r.ok).toBe(false);
    expect(r.out).toMatch(/FastfenceIncidentNotProgressing/);
  });
});
