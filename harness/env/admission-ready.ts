// Waits until the ValidatingAdmissionPolicies just created on a harness API server are in
// force. kube-apiserver compiles policies and bindings from its informers on a periodic
// refresh, so a request sent at once after creating them can pass unchecked: a test that
// asserts a refusal would then fail for a reason that is not its subject (CI on 357183c:
// release-slot's first case, 84 ms after set-up). The wait is a canary policy, created
// after the others, that refuses one harmless request (a dry-run ConfigMap create, never
// stored); once it refuses, the policies created before it are in force too, since the
// apiserver reads them from the same watch streams, in order, in the same refresh. The
// canary is deleted afterwards. waitAdmissionDeletionsInForce does the same after policies
// were deleted (the canary refuses: the deletions before it are in force), with a canary
// of a name of its own: for the moment its own deletion takes to be in force, it refuses
// only that name, never the canary of a later waitAdmissionInForce.
// Test infrastructure; it never talks to any server but the test one.
import { randomBytes } from "node:crypto";
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { EnvError, sleep } from "./base.ts";

const CANARY = "fastfence-harness-admission-canary";
const REFUSAL = "harness canary: admission policies are in force";

/** Create the canary and wait until it refuses its request; then remove it. */
export async function waitAdmissionInForce(
  kc: KubeConfig,
  timeoutMs = 30_000,
  canary = CANARY,
): Promise<void> {
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  await adm.createValidatingAdmissionPolicy({
    body: {
      metadata: { name: canary },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] },
          ],
        },
        validations: [{ expression: `object.metadata.name != '${canary}'`, message: REFUSAL }],
      },
    },
  });
  await adm.createValidatingAdmissionPolicyBinding({
    body: { metadata: { name: canary }, spec: { policyName: canary, validationActions: ["Deny"] } },
  });
  const t0 = Date.now();
  let last = "";
  for (;;) {
    try {
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: canary } },
        dryRun: "All",
      });
      last = "the dry-run create was admitted";
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      if (text.includes(REFUSAL)) break;
      last = text;
    }
    if (Date.now() - t0 > timeoutMs)
      throw new EnvError(`admission policies not in force ${timeoutMs} ms after they were created (${last})`);
    await sleep(100);
  }
  await adm.deleteValidatingAdmissionPolicyBinding({ name: canary });
  await adm.deleteValidatingAdmissionPolicy({ name: canary });
}

/** After policies or bindings were deleted: wait until the deletions are in force. */
export function waitAdmissionDeletionsInForce(kc: KubeConfig, timeoutMs = 30_000): Promise<void> {
  return waitAdmissionInForce(kc, timeoutMs, `${CANARY}-${randomBytes(4).toString("hex")}`);
}
