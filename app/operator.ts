// Operator actions as the CLI performs them, for callers outside the product that act as an
// operator (the bench's hang-mid-round trial asks for a fence as `fastfence fence` does):
// built from a KubeConfig with the product's own client, so the whole path runs from the
// artifact. It decides nothing the CLI does not.
import type { KubeConfig } from "@kubernetes/client-node";
import { requestFence } from "../cli/fence.ts";
import { Kube } from "../infra/kube/client.ts";

/** `fastfence fence NODE --reason TEXT` in `namespace`, as the identity of `kubeConfig`. */
export function operatorFence(
  kubeConfig: KubeConfig,
  o: { node: string; reason: string; namespace: string; policy: string; command: string },
): ReturnType<typeof requestFence> {
  return requestFence(new Kube(kubeConfig, { requestTimeoutMs: 10_000 }), o);
}
