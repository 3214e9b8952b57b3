// The install-step reader of harness/install-doc.ts: markers bind to the block right after
// them, every unmarked yaml block is applied only when asked, order is the document's.
import { describe, expect, it } from "vitest";
import { installSteps } from "../../../harness/install-doc.ts";

const DOC = [
  "intro",
  "<!-- install: run -->",
  "```sh",
  "kubectl apply -k a",
  "```",
  "<!-- install: file x/kustomization.yaml -->",
  "```yaml",
  "kind: Kustomization",
  "```",
  "<!-- install: run -->",
  "some text breaks the marker",
  "```sh",
  "echo not run",
  "```",
  "```yaml",
  "kind: Namespace",
  "```",
  "<!-- install: operator strimzi -->",
  "```sh",
  "kubectl wait kafka",
  "```",
].join("\n");

describe("installSteps", () => {
  it("reads marked blocks in order; a marker followed by text marks nothing", () => {
    expect(installSteps(DOC, { applyEveryYaml: false })).toEqual([
      { kind: "run", script: "kubectl apply -k a\n", line: 3 },
      { kind: "file", path: "x/kustomization.yaml", text: "kind: Kustomization\n", line: 7 },
      { kind: "operator", name: "strimzi", script: "kubectl wait kafka\n", line: 19 },
    ]);
  });

  it("applies every other yaml block when asked", () => {
    const steps = installSteps(DOC, { applyEveryYaml: true });
    expect(steps.map((s) => s.kind)).toEqual(["run", "file", "apply", "operator"]);
  });

  it("refuses a run marker on a block that is not sh", () => {
    expect(() =>
      installSteps("<!-- install: run -->\n```yaml\na: 1\n```\n", { applyEveryYaml: false }),
    ).toThrow(/must be ```sh/);
  });
});
