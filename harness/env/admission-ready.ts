// Waits until the ValidatingAdmissionPolicies just created on a harness API server are in
// force. kube-apiserver compiles policies and bindings from its informers on a periodic
// refresh, so a request sent at once after creating them can pass unchecked: a test that
// asserts a refusal would then fail for a reason that is not its subject (CI on 357183c:
// release-slot's first case, 84 ms after set-up). The wait is a canary policy, created
// after the others, that refuses one harmless request (a dry-run ConfigMap create, never
// stored); once it refuses, the policies created before it are in force too, since the
// apiserver reads them from the same watch streams, in order, in the same refresh. The
// canary is deleted afterwards. Test infrastructure; it never talks to any server but the test one.
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { EnvError, sleep } from "./base.ts";

const CANARY = "fastfence-harness-admission-canary";
const REFUSAL = "harness canary: admission policies are in force";

/** Create the canary and wait until it refuses its request; then remove it. */
export async function waitAdmissionInForce(kc: KubeConfig, timeoutMs = 30_000): Promise<void> {
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  await adm.createValidatingAdmissionPolicy({
    body: {
      metadata: { name: CANARY },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] },
          ],
        },
        validations: [{ expression: `object.metadata.name != '${CANARY}'`, message: REFUSAL }],
      },
    },
  });
  await adm.createValidatingAdmissionPolicyBinding({
    body: { metadata: { name: CANARY }, spec: { policyName: CANARY, validationActions: ["Deny"] } },
  });
  const t0 = Date.now();
  let last = "";
  for (;;) {
    try {
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: CANARY } },
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
  await adm.deleteValidatingAdmissionPolicyBinding({ name: CANARY });
  await adm.deleteValidatingAdmissionPolicy({ name: CANARY });
}
