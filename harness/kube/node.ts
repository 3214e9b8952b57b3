// The Node object of a kwok-managed node, as the harness's kwok nodes and the lab create
// it: kwok labels and annotations, capacity, node info with a boot ID, optionally a
// NoSchedule taint, extra labels, annotations and addresses. Pure: it builds the object
// and never talks to a server.
import type { V1Node, V1NodeAddress } from "@kubernetes/client-node";

export interface NodeObjectOptions {
  /** Extra labels (type=kwok and the kubernetes.io ones are always set). */
  labels?: Record<string, string>;
  /** Extra annotations (the kwok ones are always set). */
  annotations?: Record<string, string>;
  /** Allocatable/capacity (defaults: 32 cpu, 256Gi memory, 110 pods). */
  capacity?: { cpu?: string; memory?: string; pods?: string };
  /** Add the conventional kwok NoSchedule taint (default false, so plain pods schedule). */
  taint?: boolean;
  /** status.addresses (none by default). */
  addresses?: V1NodeAddress[];
}

export function kwokNodeObject(name: string, bootId: string, opts: NodeObjectOptions = {}): V1Node {
  const cap = {
    cpu: opts.capacity?.cpu ?? "32",
    memory: opts.capacity?.memory ?? "256Gi",
    pods: opts.capacity?.pods ?? "110",
  };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: {
        type: "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        ...opts.labels,
      },
      annotations: {
        "kwok.x-k8s.io/node": "fake",
        "node.alpha.kubernetes.io/ttl": "0",
        ...opts.annotations,
      },
    },
    spec: opts.taint ? { taints: [{ key: "kwok.x-k8s.io/node", value: "fake", effect: "NoSchedule" }] } : {},
    status: {
      allocatable: cap,
      capacity: cap,
      ...(opts.addresses ? { addresses: opts.addresses } : {}),
      nodeInfo: {
        architecture: "amd64",
        bootID: bootId,
        containerRuntimeVersion: "kwok",
        kernelVersion: "kwok",
        kubeProxyVersion: "v1.34.4",
        kubeletVersion: "v1.34.4",
        machineID: name,
        operatingSystem: "linux",
        osImage: "kwok",
        systemUUID: name,
      },
    },
  };
}
