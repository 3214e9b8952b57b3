// The extension example examples/incident-webhook (docs/adding-a-function.md, part 1):
// its own tests pass — `npm test` in its folder: tsc against the @fastfence/events package
// built from this checkout, then node:test through faas-js-runtime with real catalog
// events — and its deployment files agree with the repository: the Triggers name the
// fastfence Broker, its namespace and dead-letter sink, one per handled type, and deliver to
// the Service func.yaml deploys; the pins are exact; the package the example imports is the
// current catalog. A copy of the folder outside the repository, with the packed package
// installed as docs/adding-a-function.md says before `kn func deploy`, passes its tests
// too. The package build and the example's `npm ci` run only when their inputs changed
// (scripts/examples.ts, also run by scripts/setup.sh); the copy is removed afterwards.
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { load, loadAll } from "js-yaml";
import { beforeAll, describe, expect, test } from "vitest";
import { CATALOG, EVENT_TYPES, isEventType } from "../../events/catalog.ts";
import { EVENTS_PACKAGE, ROOT, ensureEventsPackage, ensureExampleInstalled } from "../../scripts/examples.ts";

const EX = join(ROOT, "examples/incident-webhook");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");
const json = (p: string) => JSON.parse(read(p)) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  spec?: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}
const docs = (p: string) => (loadAll(read(p)) as K8sObject[]).filter(Boolean);

const func = load(read("examples/incident-webhook/func.yaml")) as {
  name: string;
  runtime: string;
  invoke: string;
  namespace: string;
  build: { builder: string; buildEnvs: { name: string; value: string }[] };
  run: { envs: { name: string; value: string }[] };
  deploy: { labels: { key: string; value: string }[] };
};
const pkg = json("examples/incident-webhook/package.json");
const triggers = docs("examples/incident-webhook/trigger.yaml");
const eventing = docs("knative/base/eventing/broker.yaml");
const broker = eventing.find((o) => o.kind === "Broker")!;

beforeAll(() => {
  ensureEventsPackage();
  ensureExampleInstalled(EX);
}, 300_000);

/** Runs npm in `cwd`; on failure throws with everything it printed. */
async function npm(cwd: string, ...args: string[]): Promise<string> {
  const r = await promisify(execFile)("npm", args, { cwd, maxBuffer: 16 << 20 }).catch(
    (err: { code?: number; stdout?: string; stderr?: string }) => {
      throw new Error(`npm ${args.join(" ")} exited ${err.code}:\n${err.stdout}\n${err.stderr}`);
    },
  );
  return r.stdout;
}

/** The node:test summary of an `npm test` run passed and ran the HTTP-contract tests. */
function expectPassed(stdout: string): void {
  const count = (what: string) => Number(new RegExp(`^ℹ ${what} (\\d+)$`, "m").exec(stdout)?.[1]);
  expect(count("fail"), stdout).toBe(0);
  expect(count("pass")).toBeGreaterThanOrEqual(30);
  expect(stdout).toMatch(/in binary mode: 204 and one summary posted/);
  expect(stdout).toMatch(/in structured mode: 204 and one summary posted/);
}

describe("examples/incident-webhook", () => {
  // The two slow ones run side by side: one compiles while the other installs.
  test.concurrent(
    "its own tests pass (npm test: tsc, then node:test through faas-js-runtime)",
    async () => {
      expectPassed(await npm(EX, "test"));
    },
    240_000,
  );

  test.concurrent(
    "a copy outside the repository, with the packed @fastfence/events installed, passes them too",
    async () => {
      // What `kn func build` gets: the folder alone. The steps docs/adding-a-function.md gives.
      const dir = mkdtempSync(join(tmpdir(), "ff-incident-webhook-"));
      try {
        cpSync(EX, dir, { recursive: true, filter: (src) => !/[/\\](node_modules|build)$/.test(src) });
        const packed = JSON.parse(
          await npm(EVENTS_PACKAGE, "pack", "--json", "--ignore-scripts", "--pack-destination", dir),
        ) as { filename: string }[];
        await npm(dir, "install", "--prefer-offline", "--no-audit", "--no-fund", `./${packed[0]!.filename}`);
        const copied = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as typeof pkg;
        expect(copied.dependencies["@fastfence/events"]).toBe(`file:${packed[0]!.filename}`);
        expectPassed(await npm(dir, "test"));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    240_000,
  );

  test("one Trigger per handled type, on the fastfence Broker, delivering to the function", async () => {
    const { HANDLED_TYPES } = (await import(pathToFileURL(join(EX, "src/summary.ts")).href)) as {
      HANDLED_TYPES: readonly string[];
    };
    expect(triggers.every((t) => t.kind === "Trigger" && t.apiVersion === "eventing.knative.dev/v1")).toBe(
      true,
    );
    const types = triggers.map((t) => t.spec!.filter.attributes.type as string);
    expect([...types].sort()).toEqual([...HANDLED_TYPES].sort());
    const core = new Set(docs("knative/base/eventing/triggers.yaml").map((t) => t.metadata!.name));
    for (const t of triggers) {
      const name = t.metadata!.name!;
      expect(isEventType(t.spec!.filter.attributes.type), name).toBe(true);
      expect(core.has(name), `${name} clashes with a fastfence Trigger`).toBe(false);
      expect(t.metadata!.namespace, name).toBe(broker.metadata!.namespace);
      expect(t.spec!.broker, name).toBe(broker.metadata!.name);
      expect(t.spec!.subscriber.ref, name).toEqual({
        apiVersion: "serving.knative.dev/v1",
        kind: "Service",
        name: func.name,
        namespace: func.namespace,
      });
      const sink = t.spec!.delivery.deadLetterSink.ref;
      expect(
        eventing.some((o) => o.kind === sink.kind && o.metadata!.name === sink.name),
        name,
      ).toBe(true);
      // The webhook's timeout leaves the delivery time to answer 503 before Knative gives up.
      const timeoutMs = Number(func.run.envs.find((e) => e.name === "WEBHOOK_TIMEOUT_MS")!.value);
      expect(Number(/^PT(\d+)S$/.exec(t.spec!.delivery.timeout)![1]) * 1000).toBeGreaterThan(timeoutMs);
    }
    expect(new Set(triggers.map((t) => t.metadata!.name)).size).toBe(triggers.length);
  });

  test("func.yaml: a TypeScript CloudEvent function built by pack, outside fastfence's namespace", () => {
    expect(func).toMatchObject({ name: pkg.name, runtime: "typescript", invoke: "cloudevent" });
    expect(func.build.builder).toBe("pack");
    expect(func.build.buildEnvs).toContainEqual({ name: "BP_NODE_RUN_SCRIPTS", value: "build" });
    expect(func.namespace).not.toBe(broker.metadata!.namespace);
    expect(func.deploy.labels).toContainEqual({
      key: "networking.knative.dev/visibility",
      value: "cluster-local",
    });
    expect(func.run.envs.find((e) => e.name === "WEBHOOK_URL")?.value).toMatch(
      /^\{\{ secret:[a-z0-9-]+:[a-z]+ \}\}$/,
    );
    expect(read("examples/incident-webhook/.funcignore").split("\n")).toContain("node_modules");
  });

  test("package.json: exact pins, faas-js-runtime starts the built function, the catalog from packages/events", () => {
    expect(pkg.type).toBe("module");
    expect(pkg.scripts.start).toBe("faas-js-runtime ./build/src/index.js");
    expect(pkg.dependencies["@fastfence/events"]).toBe("file:../../packages/events");
    const lock = json("examples/incident-webhook/package-lock.json");
    for (const name of ["faas-js-runtime", "cloudevents", "typescript", "@types/node"]) {
      const want = pkg.dependencies[name] ?? pkg.devDependencies[name];
      expect(want, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(lock.packages[`node_modules/${name}`].version, name).toBe(want);
    }
  });

  test("@fastfence/events: the root's version and zod, and built from the current catalog", async () => {
    const events = json("packages/events/package.json");
    const root = json("package.json");
    expect(events.version).toBe(root.version);
    expect(events.dependencies).toEqual({ zod: root.dependencies.zod });
    expect(existsSync(join(EVENTS_PACKAGE, events.exports["."].types))).toBe(true);
    const built = (await import(pathToFileURL(join(EVENTS_PACKAGE, events.exports["."].default)).href)) as {
      EVENT_TYPES: unknown;
      CATALOG: Record<string, { topic: string; emittedBy: unknown; consumedBy: unknown }>;
      parseEvent: unknown;
    };
    expect(built.EVENT_TYPES).toEqual(EVENT_TYPES);
    for (const [type, entry] of Object.entries(CATALOG)) {
      const { topic, emittedBy, consumedBy } = built.CATALOG[type]!;
      expect({ topic, emittedBy, consumedBy }, type).toEqual({
        topic: entry.topic,
        emittedBy: entry.emittedBy,
        consumedBy: entry.consumedBy,
      });
    }
    expect(typeof built.parseEvent).toBe("function");
  });
});
