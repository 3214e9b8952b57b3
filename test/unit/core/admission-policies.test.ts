// The admission policies of knative/base/admission cannot drift from the code they guard:
// the NodeFence status policy's transition table is core/incident.ts TRANSITIONS, its phase
// owners are exactly the stages whose decide.pure.ts enters each phase, every status field
// of the zod schema has an owner rule (or is declared free text or derived), and the heartbeat-Lease
// policy names Leases the way core/decision.ts heartbeatLeaseName does, and the admission
// ledger policy and manifest name the Lease and annotation core/admission-ledger.ts uses.
import { readFileSync } from "node:fs";
import { load as loadYaml, loadAll } from "js-yaml";
import { describe, expect, it } from "vitest";
import { ADMISSION_LEDGER_ANNOTATION, ADMISSION_LEDGER_LEASE } from "../../../core/admission-ledger.ts";
import { heartbeatLeaseName } from "../../../core/decision.ts";
import {
  NodeFenceStatusSchema,
  PHASES,
  PHASE_TIMESTAMP_KEY,
  TRANSITIONS,
  type Phase,
} from "../../../core/incident.ts";
import { stageNames } from "../../../functions/registry.ts";

const read = (f: string) => readFileSync(new URL(`../../../${f}`, import.meta.url), "utf8");

interface Policy {
  kind: string;
  metadata: { name: string };
  spec: {
    matchConditions?: { expression: string }[];
    variables?: { name: string; expression: string }[];
    validations: { expression: string }[];
  };
}
function policy(file: string): { policy: Policy; text: string } {
  const text = read(`knative/base/admission/${file}`);
  const docs = loadAll(text) as Policy[];
  return { policy: docs.find((d) => d.kind === "ValidatingAdmissionPolicy")!, text };
}
const variable = (p: Policy, name: string) => p.spec.variables!.find((v) => v.name === name)!.expression;

/** Phase → stage, read from the stages' decisions: the phases each one passes to transition(). */
function phasesEnteredInCode(): Map<Phase, Set<string>> {
  const out = new Map<Phase, Set<string>>();
  for (const stage of stageNames()) {
    const src = read(`functions/${stage}/decide.pure.ts`);
    for (const m of src.matchAll(/transition\([\s\S]*?,\s*("(\w+)"|(\w+))\s*,/g)) {
      let phases: string[] = m[2] ? [m[2]] : [];
      if (m[3]) {
        // a variable: `const to = cond ? "A" : "B";`
        const def = new RegExp(`const ${m[3]} = ([^;]+);`).exec(src);
        phases = [...(def?.[1] ?? "").matchAll(/"(\w+)"/g)].map((x) => x[1]!);
      }
      for (const ph of phases) {
        expect(PHASES, `${stage} enters unknown phase ${ph}`).toContain(ph);
        if (!out.has(ph as Phase)) out.set(ph as Phase, new Set());
        out.get(ph as Phase)!.add(stage);
      }
    }
  }
  return out;
}

describe("NodeFence status admission policy", () => {
  const { policy: p, text } = policy("nodefence-status-policy.yaml");
  const owners = JSON.parse(variable(p, "owners")) as Record<Phase, string>;
  const validations = p.spec.validations.map((v) => v.expression).join("\n");

  it("its transition table is core/incident.ts TRANSITIONS", () => {
    expect(JSON.parse(variable(p, "transitions"))).toEqual(TRANSITIONS);
  });

  it("every phase has one owner, and it is the stage whose decision enters that phase", () => {
    expect(Object.keys(owners).sort()).toEqual([...PHASES].sort());
    const inCode = phasesEnteredInCode();
    expect([...inCode.keys()].sort()).toEqual([...PHASES].sort());
    for (const [phase, stages] of inCode) expect([...stages], phase).toEqual([owners[phase]]);
    for (const s of Object.values(owners)) expect(stageNames()).toContain(s);
  });

  it("each phase's timestamp may be added only on entering it, by its owner", () => {
    for (const ph of PHASES) {
      const key = PHASE_TIMESTAMP_KEY[ph];
      expect(validations).toContain(
        `oldObject.?status.?timestamps.?${key} == object.?status.?timestamps.?${key}`,
      );
      if (ph !== "Suspected")
        expect(validations).toContain(`variables.newPhase == "${ph}" && variables.stage == "${owners[ph]}"`);
    }
    expect(variable(p, "canStampSuspected")).toContain(`variables.stage == "${owners.Suspected}"`);
  });

  it("every status field has an owner rule, or is declared free text in the header", () => {
    const free = ["reason", "message", "conditions"];
    for (const field of Object.keys(NodeFenceStatusSchema.shape)) {
      if (field === "phase" || field === "timestamps") continue;
      if (free.includes(field))
        expect(text.split("\n").find((l) => l.includes("| any writer"))).toMatch(
          new RegExp(`\\b${field}\\b`),
        );
      else expect(validations, `no rule for status.${field}`).toContain(`.?${field}`);
    }
  });

  it("matches the NodeFence resource and its status subresource", () => {
    const doc = loadYaml(text.split("\n---\n")[0]!) as { spec: { matchConstraints: unknown } };
    expect(JSON.stringify(doc.spec.matchConstraints)).toContain('"nodefences","nodefences/status"');
  });
});

describe("heartbeat Lease admission policy", () => {
  const { policy: p } = policy("heartbeat-lease-policy.yaml");
  it("matches the Leases heartbeatLeaseName names, and computes the same name (prefix, 253 cut)", () => {
    const prefix = "fastfence-alive-";
    expect(heartbeatLeaseName("node-a")).toBe(`${prefix}node-a`);
    expect(heartbeatLeaseName("n".repeat(300))).toHaveLength(253);
    expect(p.spec.matchConditions![0]!.expression).toBe(`object.metadata.name.startsWith("${prefix}")`);
    const own = variable(p, "ownLease");
    expect(own).toContain(`"${prefix}" + variables.nodeClaim`);
    expect(own).toContain("substring(0, 253)");
  });
  it("requires the event source's ServiceAccount and the node claim", () => {
    const all = p.spec.validations.map((v) => v.expression).join("\n");
    expect(all).toContain('":fastfence-source"');
    expect(variable(p, "nodeClaim")).toContain('"authentication.kubernetes.io/node-name"');
  });
});

describe("admission ledger policy and manifest", () => {
  const { policy: p } = policy("admission-ledger-policy.yaml");
  it("matches the Lease core/admission-ledger.ts names; the shipped one is that Lease, with an empty ledger", () => {
    expect(p.spec.matchConditions![0]!.expression).toBe(
      `object.metadata.name == "${ADMISSION_LEDGER_LEASE}"`,
    );
    const shipped = loadYaml(read("knative/base/rbac/admission-ledger.yaml")) as {
      kind: string;
      metadata: { name: string; annotations?: Record<string, string> };
    };
    expect(shipped.kind).toBe("Lease");
    expect(shipped.metadata.name).toBe(ADMISSION_LEDGER_LEASE);
    // No annotation at all: an empty ledger that re-applying the manifests never resets.
    expect(shipped.metadata.annotations).toBeUndefined();
  });
  it("reads the ledger from the annotation core/admission-ledger.ts writes; only confirm may change it", () => {
    expect(variable(p, "ledger")).toContain(`object.metadata.annotations["${ADMISSION_LEDGER_ANNOTATION}"]`);
    expect(variable(p, "before")).toContain(
      `oldObject.metadata.annotations["${ADMISSION_LEDGER_ANNOTATION}"]`,
    );
    const rule = p.spec.validations[0]!.expression;
    expect(rule).toContain('":fastfence-confirm"');
    expect(rule).toContain(
      'request.operation == "CREATE" ? variables.ledger == "{}" : variables.ledger == variables.before',
    );
  });
});
