// The cluster-scoped FencingPolicy "default" and the BMC credentials its levels name, as
// the harness's pipeline cluster and the lab create them: a Secret bmc-<node> per node
// in the fastfence namespace, a Redfish level per node, and the policy object itself.
// It only writes to the API server it is given, and never reads a credential back.
import type { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import type { FencingPolicySpecInput } from "../../core/policy.ts";

/** Where fastfence runs: its ServiceAccounts, Secrets, Leases and NodeFences. */
export const FASTFENCE_NAMESPACE = "fastfence-system";

type NodeLevels = NonNullable<NonNullable<FencingPolicySpecInput["fencing"]>["nodes"]>[number];
export type FencingLevelInput = NodeLevels["levels"][number];

/** The Secret `bmc-<node>` (username, password) that a level's credentialsSecret names. */
export async function createBmcSecret(
  core: CoreV1Api,
  node: string,
  username: string,
  password: string,
): Promise<void> {
  await core.createNamespacedSecret({
    namespace: FASTFENCE_NAMESPACE,
    body: { metadata: { name: `bmc-${node}` }, stringData: { username, password } },
  });
}

/** A Redfish level (plain HTTP, 5 s) for the lab Redfish emulator of `node` at host:port. */
export function redfishLevel(host: string, port: number, node: string): FencingLevelInput {
  return {
    driver: "redfish",
    address: `redfish+http://${host}:${port}/redfish/v1/Systems/${node}`,
    credentialsSecret: `bmc-${node}`,
    timeoutMs: 5000,
    insecure: true, // the lab's Redfish speaks plain HTTP on loopback: allowed only explicitly
  };
}

/** Create the FencingPolicy `default` with this spec. */
export async function createFencingPolicy(
  custom: CustomObjectsApi,
  spec: FencingPolicySpecInput,
): Promise<void> {
  await custom.createClusterCustomObject({
    group: "fastfence.io",
    version: "v1alpha1",
    plural: "fencingpolicies",
    body: {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "FencingPolicy",
      metadata: { name: "default" },
      spec,
    },
  });
}
