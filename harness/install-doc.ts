// Reads the install steps of a deployment doc (docs/deploy-knative.md, docs/deploy-openshift.md)
// in document order, so `make test-deploy` runs exactly what the doc tells a user to do: a
// fenced block right after `<!-- install: run -->` is a shell script to run, after
// `<!-- install: file PATH -->` a file to write, after `<!-- install: operator NAME -->` a
// wait for an operator (the test plays that operator's part instead), and, with
// `applyEveryYaml`, every other ```yaml block is objects to apply. It must never run anything
// itself or change the docs: it only parses markdown.

export type InstallStep =
  | { kind: "run"; script: string; line: number }
  | { kind: "file"; path: string; text: string; line: number }
  | { kind: "operator"; name: string; script: string; line: number }
  | { kind: "apply"; yaml: string; line: number };

const MARKER = /^<!--\s*install:\s*(run|file|operator)\s*([^\s]*)\s*-->$/;

/** Removes the indentation every non-empty line shares (blocks inside list items). */
function dedent(lines: string[]): string {
  const indents = lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length);
  const cut = indents.length ? Math.min(...indents) : 0;
  return lines.map((l) => l.slice(cut)).join("\n") + "\n";
}

export function installSteps(markdown: string, opts: { applyEveryYaml: boolean }): InstallStep[] {
  const lines = markdown.split("\n");
  const steps: InstallStep[] = [];
  let marker: RegExpExecArray | null = null;
  for (let i = 0; i < lines.length; i++) {
    const t = lines[i]!.trim();
    const m = MARKER.exec(t);
    if (m) {
      marker = m;
      continue;
    }
    const fence = /^```(\w*)/.exec(t);
    if (!fence) {
      if (t) marker = null; // a marker belongs to the block right after it
      continue;
    }
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== "```") end++;
    if (end === lines.length) throw new Error(`line ${i + 1}: unclosed code block`);
    const body = dedent(lines.slice(start, end));
    const lang = fence[1] ?? "";
    const line = i + 1;
    if (marker) {
      const [, kind, arg] = marker;
      if (kind === "run" || kind === "operator") {
        if (lang !== "sh") throw new Error(`line ${line}: an install ${kind} block must be \`\`\`sh`);
        steps.push(kind === "run" ? { kind, script: body, line } : { kind, name: arg!, script: body, line });
      } else {
        if (!arg) throw new Error(`line ${line}: install file needs a path`);
        steps.push({ kind: "file", path: arg, text: body, line });
      }
    } else if (opts.applyEveryYaml && lang === "yaml") {
      steps.push({ kind: "apply", yaml: body, line });
    }
    marker = null;
    i = end;
  }
  return steps;
}
