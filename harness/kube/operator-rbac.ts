// The least-privilege operator RBAC that docs/rbac.md prints (its operator-rbac block,
// bound to the group sre-oncall), parsed exactly as printed, so a test can give a person
// the documented rights and nothing more. It only reads docs/rbac.md; it never applies
// anything itself nor widens the block.
import { loadAllYaml, type KubernetesObject } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../env/index.ts";

/** The group the documented operator RBAC binds. */
export const OPERATOR_GROUP = "sre-oncall";

/** The objects of docs/rbac.md's operator-rbac block. */
export function operatorRbacFromDocs(): KubernetesObject[] {
  const doc = readFileSync(join(ROOT, "docs/rbac.md"), "utf8");
  const m = /<!-- operator-rbac:begin -->\s*```yaml\n([\s\S]*?)```\s*<!-- operator-rbac:end -->/.exec(doc);
  if (!m) throw new Error("docs/rbac.md: no operator-rbac block");
  return (loadAllYaml(m[1]!) as KubernetesObject[]).filter((o) => o?.kind);
}
