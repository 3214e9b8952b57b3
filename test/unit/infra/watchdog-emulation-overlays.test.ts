// The lab's emulated watchdog (FASTFENCE_WATCHDOG_EMULATION=lab-fifo: a FIFO, which resets
// nothing, accepted as the node's watchdog; infra/watchdog/device.ts) can never be enabled by
// a shipped manifest: every overlay under knative/overlays, alone and with every component
// under knative/components, rendered with the real kustomize, and no container may set it —
// not as an env entry, not through a ConfigMap or Secret key it imports (envFrom or
// valueFrom) — and no rendered object may name it or its value at all.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KNATIVE_DIR, render, renderWith, type KubeObject } from "../../../harness/kustomize.ts";

const VAR = "FASTFENCE_WATCHDOG_EMULATION";

interface Container {
  name: string;
  env?: { name: string; value?: string; valueFrom?: { configMapKeyRef?: { name?: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string }; prefix?: string }[];
}

/** Every container of a pod-bearing object (workloads, Knative Services, CronJobs, Pods). */
function containersOf(o: KubeObject): Container[] {
  const spec = o.spec as Record<string, unknown> | undefined;
  const pods = [
    (spec?.template as { spec?: unknown } | undefined)?.spec,
    (
      (spec?.jobTemplate as { spec?: { template?: { spec?: unknown } } } | undefined)?.spec?.template as
        { spec?: unknown } | undefined
    )?.spec,
    o.kind === "Pod" ? spec : undefined,
  ] as ({ containers?: Container[]; initContainers?: Container[] } | undefined)[];
  return pods.flatMap((p) => [...(p?.containers ?? []), ...(p?.initContainers ?? [])]);
}

/** Where a rendered set of objects enables the emulation: one line per place. */
export function emulationSetters(objects: readonly KubeObject[]): string[] {
  const found: string[] = [];
  const data = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name) as
      (KubeObject & { data?: Record<string, string>; stringData?: Record<string, string> }) | undefined;
    return { ...(o?.data ?? {}), ...(o?.stringData ?? {}) };
  };
  for (const o of objects)
    for (const c of containersOf(o)) {
      const where = `${o.kind} ${o.metadata.name} container ${c.name}`;
      for (const e of c.env ?? []) if (e.name === VAR) found.push(`${where}: env ${VAR}`);
      for (const f of c.envFrom ?? []) {
        const ref = f.configMapRef
          ? data("ConfigMap", f.configMapRef.name)
          : f.secretRef
            ? data("Secret", f.secretRef.name)
            : {};
        for (const k of Object.keys(ref))
          if (`${f.prefix ?? ""}${k}` === VAR) found.push(`${where}: envFrom key ${k}`);
      }
    }
  // Nothing else may carry it either (a ConfigMap key a later patch could wire, the value).
  for (const o of objects) {
    const text = JSON.stringify(o);
    if (text.includes(VAR) || text.includes("lab-fifo"))
      found.push(`${o.kind} ${o.metadata.name}: names ${VAR} or lab-fifo`);
  }
  return found;
}

const OVERLAYS = readdirSync(join(KNATIVE_DIR, "overlays"));
const COMPONENTS = readdirSync(join(KNATIVE_DIR, "components"));
const renders: [string, () => KubeObject[]][] = OVERLAYS.flatMap((o) => {
  const dir = join(KNATIVE_DIR, "overlays", o);
  return [
    [o, () => render(dir)] as [string, () => KubeObject[]],
    [
      `${o} + components ${COMPONENTS.join(", ")}`,
      () =>
        renderWith(
          [dir],
          COMPONENTS.map((c) => join(KNATIVE_DIR, "components", c)),
        ),
    ] as [string, () => KubeObject[]],
  ];
});

describe("the check itself, on plain data", () => {
  const ds = (env: Container["env"], envFrom?: Container["envFrom"]): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "fastfence-source" },
    spec: { template: { spec: { containers: [{ name: "source", env, ...(envFrom ? { envFrom } : {}) }] } } },
  });
  it("finds an env entry, an imported ConfigMap key, and any mention", () => {
    expect(emulationSetters([ds([{ name: VAR, value: "lab-fifo" }])])).not.toEqual([]);
    const cm = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "rt" },
      data: { [VAR]: "lab-fifo" },
    } as KubeObject;
    expect(emulationSetters([ds([], [{ configMapRef: { name: "rt" } }]), cm]).join("\n")).toMatch(
      /envFrom key/,
    );
    expect(
      emulationSetters([ds([{ name: "FASTFENCE_WATCHDOG_DEVICE", value: "/host/dev/watchdog" }])]),
    ).toEqual([]);
  });
});

describe("no shipped overlay enables the lab's watchdog emulation", () => {
  it("renders at least the vanilla and openshift overlays", () => {
    expect(OVERLAYS).toEqual(expect.arrayContaining(["vanilla", "openshift"]));
  });
  it.each(renders)("%s", (_name, objects) => {
    const objs = objects();
    // the event source is there, with its watchdog device setting
    expect(objs.some((o) => o.kind === "DaemonSet")).toBe(true);
    expect(emulationSetters(objs)).toEqual([]);
  });
});
