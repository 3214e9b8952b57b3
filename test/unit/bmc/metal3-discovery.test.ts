// metal3 discovery with a fake API: node → host by providerID, by the node's own host
// annotation, or through its Machine (OpenShift machine.openshift.io/machine, Cluster API
// cluster.x-k8s.io/machine → Metal3Machine); the level a host gives; secret-free errors.
import { describe, expect, it } from "vitest";
import {
  discoverLevels,
  discoverNodeHost,
  machineFromNodeAnnotations,
  type BareMetalHostLike,
  type Metal3Api,
  type MachineRef,
} from "../../../infra/bmc/metal3.ts";

const host: BareMetalHostLike = {
  metadata: { name: "worker-0", namespace: "metal3", uid: "u-1" },
  spec: { bmc: { address: "ipmi://10.0.0.5", credentialsName: "worker-0-bmc" } },
};

function api(
  node: { providerID?: string; annotations?: Record<string, string> },
  machines: Record<string, Record<string, string>> = {},
): Metal3Api & { seen: MachineRef[] } {
  const seen: MachineRef[] = [];
  return {
    seen,
    getNode: async () => ({
      spec: node.providerID ? { providerID: node.providerID } : {},
      metadata: { annotations: node.annotations ?? {} },
    }),
    listHosts: async () => [host],
    getHost: async (ns, name) => (ns === "metal3" && name === "worker-0" ? host : undefined),
    machineAnnotations: async (ref) => {
      seen.push(ref);
      return machines[`${ref.api}:${ref.namespace}/${ref.name}`];
    },
  };
}

describe("metal3 discovery", () => {
  it("finds the host through the Machine annotation (OpenShift and Cluster API)", async () => {
    const os = api(
      { annotations: { "machine.openshift.io/machine": "openshift-machine-api/m-0" } },
      { "machine.openshift.io:openshift-machine-api/m-0": { "metal3.io/BareMetalHost": "metal3/worker-0" } },
    );
    expect((await discoverNodeHost(os, "n0")).host).toBe(host);
    const capi = api(
      { annotations: { "cluster.x-k8s.io/machine": "m-1", "cluster.x-k8s.io/cluster-namespace": "c1" } },
      { "cluster.x-k8s.io:c1/m-1": { "metal3.io/BareMetalHost": "metal3/worker-0" } },
    );
    expect((await discoverNodeHost(capi, "n0")).settings.address).toBe("ipmi://10.0.0.5");
    expect(machineFromNodeAnnotations({ "cluster.x-k8s.io/machine": "m" })).toBeUndefined();
  });

  it("gives one discovered level, or a reason", async () => {
    expect(await discoverLevels(api({ providerID: "metal3://metal3/worker-0/x" }), "n0")).toEqual({
      discoveredLevels: [
        {
          driver: "ipmi",
          address: "ipmi://10.0.0.5",
          credentialsSecret: "worker-0-bmc",
          timeoutMs: 10_000,
          discovered: { kind: "BareMetalHost", namespace: "metal3", name: "worker-0" },
        },
      ],
    });
    expect(await discoverLevels(api({ providerID: "metal3://metal3/nope/x" }), "n0")).toEqual({
      discoveryError: "node n0: BareMetalHost metal3/nope not found",
    });
    expect(
      await discoverLevels(api({ annotations: { "machine.openshift.io/machine": "ns/m-9" } }), "n0"),
    ).toEqual({
      discoveryError:
        "node n0: machine.openshift.io Machine ns/m-9 has no metal3.io/BareMetalHost annotation",
    });
  });
});
