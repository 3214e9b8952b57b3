// FASTFENCE_METAL3_NAMESPACES: parsing and validation in the runtime config, and
// KubeMetal3Api listing BareMetalHosts namespace by namespace when it is set (one
// cluster-wide list only when unset), through a fake Kube that records every request.
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import { KubeMetal3Api, rebootAnnotationKey, type BareMetalHostLike } from "../../../infra/bmc/metal3.ts";
import { loadRuntimeConfig, metal3Namespaces } from "../../../infra/config.ts";
import { KubeApiError } from "../../../infra/kube/client.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

type Req = { op: string; namespace?: string; name?: string };

/** A fake Kube: hosts by namespace; `denied` namespaces (and "*" for cluster-wide) answer 403. */
function fakeKube(hosts: Record<string, BareMetalHostLike[]>, denied: string[] = []) {
  const requests: Req[] = [];
  const items = (ns?: string) =>
    Object.entries(hosts)
      .filter(([n]) => ns === undefined || n === ns)
      .flatMap(([, hs]) => hs);
  const custom = {
    listClusterCustomObject: async () => {
      requests.push({ op: "list" });
      if (denied.includes("*")) throw new KubeApiError(403, "list baremetalhosts", {}, undefined);
      return { items: items() };
    },
    listNamespacedCustomObject: async ({ namespace }: { namespace: string }) => {
      requests.push({ op: "list", namespace });
      if (denied.includes(namespace)) throw new KubeApiError(403, "list baremetalhosts", {}, undefined);
      return { items: items(namespace) };
    },
    patchNamespacedCustomObject: async ({ namespace, name }: { namespace: string; name: string }) => {
      requests.push({ op: "patch", namespace, name });
      return {};
    },
  };
  const kube = kubeAnswering(<T>(_what: string, fn: (apis: { custom: typeof custom }) => Promise<T>) =>
    fn({ custom }),
  );
  return { kube, requests };
}

const host = (namespace: string, name: string, annotations: Record<string, string> = {}) => ({
  metadata: { namespace, name, annotations },
});

describe("FASTFENCE_METAL3_NAMESPACES", () => {
  it("is unset by default (cluster-wide), trims, drops empty entries, rejects bad names", () => {
    expect(metal3Namespaces(loadRuntimeConfig({}))).toBeUndefined();
    expect(metal3Namespaces(loadRuntimeConfig({ FASTFENCE_METAL3_NAMESPACES: "" }))).toBeUndefined();
    expect(
      metal3Namespaces(loadRuntimeConfig({ FASTFENCE_METAL3_NAMESPACES: " openshift-machine-api , b2,," })),
    ).toEqual(["openshift-machine-api", "b2"]);
    for (const bad of ["Upper", "a/b", " , ", "-x"]) {
      let err: unknown;
      try {
        loadRuntimeConfig({ FASTFENCE_METAL3_NAMESPACES: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).issues.join()).toMatch(/FASTFENCE_METAL3_NAMESPACES/);
    }
  });
});

describe("KubeMetal3Api with namespaces", () => {
  const incident = "worker-0-abc";
  const key = rebootAnnotationKey(incident);
  const hosts = {
    a: [host("a", "h1", { [key]: "{}" }), host("a", "h2")],
    b: [host("b", "h3", { [key]: "{}" })],
    c: [host("c", "h4", { [key]: "{}" })],
  };

  it("listHosts lists each configured namespace, never cluster-wide", async () => {
    const f = fakeKube(hosts, ["*"]);
    const api = new KubeMetal3Api(f.kube, { namespaces: ["a", "b"] });
    expect((await api.listHosts()).map((h) => h.metadata?.name)).toEqual(["h1", "h2", "h3"]);
    expect(f.requests).toEqual([
      { op: "list", namespace: "a" },
      { op: "list", namespace: "b" },
    ]);
  });

  it("releaseIncident patches only holds found in the configured namespaces", async () => {
    const f = fakeKube(hosts, ["*"]);
    const api = new KubeMetal3Api(f.kube, { namespaces: ["a", "b"] });
    expect(await api.releaseIncident(incident, true)).toEqual(["a/h1", "b/h3"]);
    expect(f.requests.filter((r) => r.op === "list" && r.namespace === undefined)).toEqual([]);
    expect(f.requests.filter((r) => r.op === "patch")).toEqual([
      { op: "patch", namespace: "a", name: "h1" },
      { op: "patch", namespace: "b", name: "h3" },
    ]);
  });

  it("a 403 in one namespace: strict throws; otherwise that namespace is skipped", async () => {
    const strict = fakeKube(hosts, ["a"]);
    await expect(
      new KubeMetal3Api(strict.kube, { namespaces: ["a", "b"] }).releaseIncident(incident, true),
    ).rejects.toMatchObject({ status: 403 });
    const lenient = fakeKube(hosts, ["a"]);
    expect(
      await new KubeMetal3Api(lenient.kube, { namespaces: ["a", "b"] }).releaseIncident(incident, false),
    ).toEqual(["b/h3"]);
  });

  it("without namespaces (or an empty list): one cluster-wide list, as before", async () => {
    for (const namespaces of [undefined, []]) {
      const f = fakeKube(hosts);
      const api = new KubeMetal3Api(f.kube, { namespaces });
      expect(await api.releaseIncident(incident, true)).toEqual(["a/h1", "b/h3", "c/h4"]);
      expect(f.requests.filter((r) => r.op === "list")).toEqual([{ op: "list" }]);
    }
  });
});
