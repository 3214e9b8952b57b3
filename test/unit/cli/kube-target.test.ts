// The kubectl-style flags (cli/kube-target.ts, cli/args.ts leadingOptions, cli/main.ts):
// --kubeconfig, --context and -n/--namespace before or after the command, a kubeconfig that
// cannot be used as a usage error (exit 2) naming the file or context and the contexts
// there are, $KUBECONFIG merged as kubectl merges it, the namespace's precedence (flag >
// $FASTFENCE_NAMESPACE > fastfence-system, never the context's), and every command that
// talks to the API taking the flags while the others refuse them. Kubeconfig files in a
// temp dir; no servers (the cluster they name is a closed loopback port, never reached).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { leadingOptions, parseCommand, UsageError } from "../../../cli/args.ts";
import { commandLines } from "../../../cli/completion.ts";
import { EXIT } from "../../../cli/exit-codes.ts";
import { connectKube, fastfenceNamespace, kubeTargetEnv, loadKubeConfig } from "../../../cli/kube-target.ts";
import { KUBE_TARGET_OPTIONS, takesKubeTarget } from "../../../cli/specs.ts";
import { COMMAND_CASES, fastfence } from "./cli-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "fastfence-kube-target-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(name: string, o: { contexts: Record<string, string>; current?: string }): string {
  const clusters = [...new Set(Object.values(o.contexts))];
  const yaml = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    ...clusters.map((c, i) => `- name: ${c}\n  cluster: {server: "https://127.0.0.1:${i + 1}"}`),
    "users:",
    "- name: u\n  user: {token: t}",
    "contexts:",
    ...Object.entries(o.contexts).map(
      ([ctx, c]) => `- name: ${ctx}\n  context: {cluster: ${c}, user: u, namespace: apps}`,
    ),
    ...(o.current ? [`current-context: ${o.current}`] : []),
  ].join("\n");
  const path = join(dir, name);
  writeFileSync(path, yaml);
  return path;
}

const A = kubeconfig("a.yaml", { contexts: { prod: "prod-cluster", lab: "lab-cluster" }, current: "prod" });
const B = kubeconfig("b.yaml", {
  contexts: { prod: "other", staging: "staging-cluster" },
  current: "staging",
});
const NONE = kubeconfig("none.yaml", { contexts: { prod: "prod-cluster" } });

function usage(f: () => unknown): UsageError {
  try {
    f();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error("no UsageError");
}

describe("loadKubeConfig", () => {
  it("--kubeconfig and --context choose the file and the context", () => {
    const kc = loadKubeConfig("pause", { kubeconfig: A, context: "lab" }, {});
    expect(kc.getCurrentContext()).toBe("lab");
    expect(kc.getCurrentCluster()?.server).toBe("https://127.0.0.1:2");
    expect(loadKubeConfig("pause", { kubeconfig: A }, {}).getCurrentContext()).toBe("prod");
  });

  it("--kubeconfig wins over $KUBECONFIG", () => {
    expect(loadKubeConfig("pause", { kubeconfig: A }, { KUBECONFIG: B }).getCurrentContext()).toBe("prod");
  });

  it("an unknown context names itself, the file and the contexts there (exit 2)", () => {
    const e = usage(() => loadKubeConfig("fence", { kubeconfig: A, context: "nope" }, {}));
    expect(e.command).toBe("fence");
    expect(e.message).toContain("--context nope");
    expect(e.message).toContain(A);
    expect(e.message).toContain("prod, lab");
  });

  it("a missing file, and a kubeconfig without a current context, are usage errors", () => {
    expect(usage(() => loadKubeConfig("trace", { kubeconfig: join(dir, "gone") }, {})).message).toContain(
      "ENOENT",
    );
    const e = usage(() => loadKubeConfig("trace", { kubeconfig: NONE }, {}));
    expect(e.message).toContain("no current context");
    expect(e.message).toContain("--context");
    expect(loadKubeConfig("trace", { kubeconfig: NONE, context: "prod" }, {}).getCurrentContext()).toBe(
      "prod",
    );
  });

  it("$KUBECONFIG as a list: the first file wins for every name and the current context; missing files are skipped", () => {
    const kc = loadKubeConfig("pause", {}, { KUBECONFIG: [join(dir, "gone"), A, B].join(":") });
    expect(kc.getCurrentContext()).toBe("prod");
    expect(kc.getCurrentCluster()?.name).toBe("prod-cluster");
    expect(kc.getContexts().map((c) => c.name)).toEqual(["prod", "lab", "staging"]);
    const none = usage(() => loadKubeConfig("pause", {}, { KUBECONFIG: join(dir, "gone") }));
    expect(none.message).toContain("no file of $KUBECONFIG exists");
  });

  it("FASTFENCE_KUBE_ENDPOINTS is used only when the command line names no cluster", () => {
    const env = { FASTFENCE_KUBE_ENDPOINTS: "https://127.0.0.9:6443" };
    expect(kubeTargetEnv("run", { context: "prod" })).toEqual({ FASTFENCE_KUBE_ENDPOINTS: undefined });
    expect(kubeTargetEnv("run", { namespace: "ff" })).toEqual({ FASTFENCE_NAMESPACE: "ff" });
    // connectKube builds without contacting anything; the extra endpoints show in its failure text
    expect(connectKube("pause", { kubeconfig: A }, {}, env)).toBeDefined();
  });
});

describe("fastfenceNamespace", () => {
  it("flag > $FASTFENCE_NAMESPACE > fastfence-system; the context's namespace is never used", () => {
    expect(fastfenceNamespace("fence", "ff-flag", { FASTFENCE_NAMESPACE: "ff-env" })).toBe("ff-flag");
    expect(fastfenceNamespace("fence", undefined, { FASTFENCE_NAMESPACE: "ff-env" })).toBe("ff-env");
    expect(fastfenceNamespace("fence", undefined, {})).toBe("fastfence-system");
    expect(usage(() => fastfenceNamespace("fence", "Not_A_Name", {})).message).toContain('"Not_A_Name"');
  });
});

describe("leadingOptions (the flags kubectl passes before the command)", () => {
  it.each([
    [["--context", "x", "pause", "n"], ["--context=x"], ["pause", "n"]],
    [
      ["--context=x", "-n", "ns", "--kubeconfig", "/k", "fence"],
      ["--context=x", "--namespace=ns", "--kubeconfig=/k"],
      ["fence"],
    ],
    [["-nns", "trace"], ["--namespace=ns"], ["trace"]],
    [["--context=-odd", "pause"], ["--context=-odd"], ["pause"]],
    [["pause", "--context", "x"], [], ["pause", "--context", "x"]],
    [["-o", "json", "version"], [], ["-o", "json", "version"]],
    [["--help"], [], ["--help"]],
  ])("%j", (argv, given, rest) => {
    expect(leadingOptions(argv, KUBE_TARGET_OPTIONS)).toEqual({ given, rest });
  });

  it.each([
    [["--context"], "--context needs a value"],
    [["-n", "--context", "x"], '-n needs a value, got the option "--context"'],
  ])("%j: %s", (argv, message) => {
    const e = usage(() => leadingOptions(argv, KUBE_TARGET_OPTIONS));
    expect(e.message).toContain(message);
  });
});

describe("which commands take the flags", () => {
  it("every command that talks to the Kubernetes API, and no other", async () => {
    const lines = await commandLines();
    const taking = Object.keys(lines).filter((c) => lines[c]!.spec && takesKubeTarget(lines[c]!.spec!));
    expect(taking.sort()).toEqual([
      "bmc",
      "fence",
      "pause",
      "release-slot",
      "resume",
      "run",
      "source",
      "trace",
    ]);
    for (const sub of Object.values(lines.lab!.subcommands!)) expect(takesKubeTarget(sub)).toBe(false);
  });

  it("after the command, each of them parses all three", () => {
    for (const c of Object.values(COMMAND_CASES).flat()) {
      if (!takesKubeTarget(c.spec)) continue;
      const p = parseCommand(c.spec, [...c.words.slice(1), "--kubeconfig", "/k", "--context=x", "-n", "ns"]);
      expect(p.values, c.words.join(" ")).toMatchObject({ kubeconfig: "/k", context: "x", namespace: "ns" });
    }
  });
});

describe("through cli/main.ts", { timeout: 30_000 }, () => {
  it("before the command: an unknown context is exit 2 naming it and the contexts", async () => {
    const r = await fastfence(["--kubeconfig", A, "--context", "nope", "pause", "node-b", "--reason", "r"]);
    expect(r.status, r.stderr).toBe(EXIT.usage);
    expect(r.stderr).toContain("fastfence pause: --context nope: no such context");
    expect(r.stderr).toContain("prod, lab");
  });

  it("after the command, the same", async () => {
    const r = await fastfence(["fence", "node-b", "--reason", "r", "--kubeconfig", A, "--context=nope"]);
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain("fastfence fence: --context nope");
  });

  it("a command that does not talk to the API refuses them (lab uses its own kubeconfig)", async () => {
    const lab = await fastfence(["--context", "prod", "lab", "status"]);
    expect(lab.status).toBe(EXIT.usage);
    expect(lab.stderr).toContain(
      "fastfence lab: --context is for the commands that talk to the Kubernetes API",
    );
    const version = await fastfence(["-n", "x", "version"]);
    expect(version.status).toBe(EXIT.usage);
    expect(version.stderr).toContain("-n/--namespace");
    const after = await fastfence(["lab", "status", "--context", "prod"]);
    expect(after.stderr).toContain("unknown option --context");
  });

  it("bmc --url refuses them: they are for --node", async () => {
    const r = await fastfence(["bmc", "status", "--url", "ipmi://127.0.0.1:1", "--context", "prod"]);
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain("--context is for --node");
  });

  it("a value missing before the command, and any other option there, are exit 2", async () => {
    const r = await fastfence(["--context"]);
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain("fastfence: --context needs a value");
    const other = await fastfence(["--context", "x", "--policy", "p", "pause"]);
    expect(other.status).toBe(EXIT.usage);
    expect(other.stderr).toContain("unknown option --policy before the command");
  });
});
