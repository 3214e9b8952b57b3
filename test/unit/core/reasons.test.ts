// The reason-code tables (core/reasons.ts): each code documented in one line, ignore and
// reject codes distinct, every code used by a stage or the executor, and an unknown code
// refused by the type checker (the @ts-expect-error lines fail `tsc` if it ever is not).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { ignored, rejected } from "../../../core/decision.ts";
import { IGNORE_CODES, REJECT_CODES } from "../../../core/reasons.ts";

const ROOT = join(import.meta.dirname, "../../..");

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => readFileSync(join(ROOT, dir, f), "utf8"));
}

describe("reason codes", () => {
  const all = { ...IGNORE_CODES, ...REJECT_CODES };

  test("each code is CamelCase and documented in one line", () => {
    for (const [code, doc] of Object.entries(all)) {
      expect(code).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(doc, code).toMatch(/^\S.*\.$/);
      expect(doc, code).not.toContain("\n");
    }
  });

  test("ignore and reject codes are distinct", () => {
    const shared = Object.keys(IGNORE_CODES).filter((c) => Object.hasOwn(REJECT_CODES, c));
    expect(shared).toEqual([]);
  });

  test("every code is produced somewhere (no dead entries)", () => {
    const text = [
      ...sources("functions"),
      ...sources("infra/runtime"),
      // the origin checks of evidence, shared by detect and confirm
      readFileSync(join(ROOT, "core/evidence-checks.ts"), "utf8"),
    ].join("\n");
    const unused = Object.keys(all).filter((c) => !text.includes(`"${c}"`));
    expect(unused).toEqual([]);
  });

  test("outcomes carry the code and the human reason", () => {
    expect(ignored("PhasePassed", "incident x already FencedOff").outcome).toEqual({
      kind: "ignored",
      code: "PhasePassed",
      reason: "incident x already FencedOff",
    });
    expect(rejected("PowerOffUnproven", "no read-back").outcome).toEqual({
      kind: "rejected",
      code: "PowerOffUnproven",
      reason: "no read-back",
    });
  });

  test("an unknown code, or a code of the other kind, does not type-check", () => {
    // @ts-expect-error not a code
    ignored("SomethingElse", "x");
    // @ts-expect-error a reject code is not an ignore code
    ignored("PowerOffUnproven", "x");
    // @ts-expect-error an ignore code is not a reject code
    rejected("PhasePassed", "x");
  });
});
