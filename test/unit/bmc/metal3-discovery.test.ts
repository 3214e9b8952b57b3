// metal3 discovery with plain data (issue 13: nothing the node writes about itself): node →
// the one Machine whose status.nodeRef names it (OpenShift Machine, or Cluster API Machine
// → Metal3Machine) → the host its metal3.io/BareMetalHost annotation names, or the host
// whose spec.consumerRef points at it; the node's annotations and providerID are ignored;
// stale, ambiguous or contradicting links are refused; secret-free errors.
import { describe, expect, it } from "vitest";
import {
  consumedBy,
  discoverLevels,
  discoverNodeHost,
  machineForNode,
  type BareMetalHostLike,
  type MachineLike,
  type Metal3Api,
} from "../../../infra/bmc/metal3.ts";

const OS = "machine.openshift.io/v1beta1";
const host = (name: string, consumer?: MachineLike): BareMetalHostLike => ({
  metadata: { name, namespace: "metal3", uid: `u-${name}` },
  spec: {
    bmc: { address: `ipmi://10.0.0.${name.slice(-1)}`, credentialsName: `${name}-bmc` },
    ...(consumer
      ? {
          consumerRef: {
            apiVersion: consumer.apiVersion!,
            kind: consumer.kind!,
            name: consumer.metadata!.name!,
            namespace: consumer.metadata!.namespace!,
          },
        }
      : {}),
  },
});
const machine = (name: string, node: string | undefined, o: Partial<MachineLike> = {}): MachineLike => ({
  apiVersion: OS,
  kind: "Machine",
  metadata: { name, namespace: "metal3", annotations: {}, ...o.metadata },
  ...(node ? { status: { nodeRef: { name: node, uid: `uid-${node}` } } } : {}),
  ...(o.spec ? { spec: o.spec } : {}),
});

function api(
  machines: MachineLike[],
  hosts: BareMetalHostLike[],
  infra: MachineLike[] = [],
): Metal3Api & { nodeReads: string[] } {
  const nodeReads: string[] = [];
  return {
    nodeReads,
    // the node's own fields are there to be ignored: annotations and providerID point elsewhere
    getNode: async (name) => {
      nodeReads.push(name);
      return {
        metadata: {
          uid: `uid-${name}`,
          annotations: { "metal3.io/BareMetalHost": "metal3/worker-9" },
        },
        spec: { providerID: "metal3://metal3/worker-9/x" },
      } as never;
    },
    listMachines: async () => machines,
    getInfrastructure: async (m) => infra.find((i) => i.metadata?.name === m.spec?.infrastructureRef?.name),
    listHosts: async () => hosts,
    getHost: async (ns, name) => hosts.find((h) => h.metadata?.namespace === ns && h.metadata?.name === name),
  };
}

describe("metal3 discovery through Machines", () => {
  const m0 = machine("m-0", "node-0", {
    metadata: { annotations: { "metal3.io/BareMetalHost": "metal3/worker-0" } },
  });
  const m1 = machine("m-1", "node-1");
  const hosts = [host("worker-0", m0), host("worker-1", m1), host("worker-9")];

  it("OpenShift: the Machine's host annotation, or the host whose consumerRef is the Machine", async () => {
    const a = api([m0, m1], hosts);
    expect((await discoverNodeHost(a, "node-0")).host.metadata?.name).toBe("worker-0");
    expect((await discoverNodeHost(a, "node-1")).host.metadata?.name).toBe("worker-1");
    expect(a.nodeReads).toEqual(["node-0", "node-1"]);
  });

  it("ignores the node's own annotation and providerID (both name worker-9)", async () => {
    await expect(discoverNodeHost(api([], hosts), "node-0")).rejects.toThrow(
      /node node-0: no Machine .* has status.nodeRef naming it/,
    );
  });

  it("Cluster API: Machine → Metal3Machine → host (annotation or consumerRef)", async () => {
    const capi = machine("c-0", "node-0", {
      spec: {
        infrastructureRef: {
          kind: "Metal3Machine",
          name: "m3m-0",
          apiVersion: "infrastructure.cluster.x-k8s.io/v1beta1",
        },
      },
    });
    capi.apiVersion = "cluster.x-k8s.io/v1beta1";
    const m3m: MachineLike = {
      apiVersion: "infrastructure.cluster.x-k8s.io/v1beta1",
      kind: "Metal3Machine",
      metadata: { name: "m3m-0", namespace: "metal3" },
    };
    const h = host("worker-2", m3m);
    expect((await discoverNodeHost(api([capi], [h, ...hosts], [m3m]), "node-0")).host).toBe(h);
    await expect(discoverNodeHost(api([capi], hosts, []), "node-0")).rejects.toThrow(/has no Metal3Machine/);
  });

  it("refuses ambiguous, stale and contradicting links", async () => {
    const twin = machine("m-0b", "node-0");
    await expect(discoverNodeHost(api([m0, twin], hosts), "node-0")).rejects.toThrow(
      /2 Machines name it .*ambiguous/,
    );
    // a link to an earlier Node of that name (other uid) does not count
    const stale = machine("m-old", undefined);
    stale.status = { nodeRef: { name: "node-0", uid: "uid-of-an-old-node" } };
    expect(() => machineForNode("node-0", "uid-node-0", [stale])).toThrow(/no Machine/);
    // annotation names a host claimed by another Machine
    const liar = machine("m-2", "node-2", {
      metadata: { annotations: { "metal3.io/BareMetalHost": "metal3/worker-1" } },
    });
    await expect(discoverNodeHost(api([liar], hosts), "node-2")).rejects.toThrow(
      /names BareMetalHost metal3\/worker-1, whose spec.consumerRef is Machine m-1: they disagree/,
    );
    // no annotation and no host consuming the Machine
    await expect(discoverNodeHost(api([machine("m-3", "node-3")], hosts), "node-3")).rejects.toThrow(
      /has no metal3.io\/BareMetalHost annotation and 0 BareMetalHosts name it in spec.consumerRef/,
    );
  });

  it("consumerRef matches kind, API group, namespace and name", () => {
    const h = host("worker-0", m0);
    expect(consumedBy(h, m0)).toBe(true);
    expect(consumedBy(h, { ...m0, kind: "Metal3Machine" })).toBe(false);
    expect(consumedBy(h, { ...m0, apiVersion: "cluster.x-k8s.io/v1beta1" })).toBe(false);
    expect(consumedBy(h, { ...m0, metadata: { ...m0.metadata, namespace: "other" } })).toBe(false);
  });

  it("gives one discovered level, or a reason", async () => {
    expect(await discoverLevels(api([m0], hosts), "node-0")).toEqual({
      discoveredLevels: [
        {
          driver: "ipmi",
          address: "ipmi://10.0.0.0",
          credentialsSecret: "worker-0-bmc",
          timeoutMs: 20_000,
          discovered: { kind: "BareMetalHost", namespace: "metal3", name: "worker-0" },
        },
      ],
    });
    const gone = machine("m-4", "node-4", {
      metadata: { annotations: { "metal3.io/BareMetalHost": "metal3/nope" } },
    });
    expect(await discoverLevels(api([gone], hosts), "node-4")).toEqual({
      discoveryError:
        "node node-4: BareMetalHost metal3/nope (metal3.io/BareMetalHost of machine.openshift.io Machine metal3/m-4) not found",
    });
  });
});
