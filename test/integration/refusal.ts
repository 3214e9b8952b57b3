// What the API server said when it refused a write, for the admission tests: the HTTP status
// and the Status message (the policy's message for a ValidatingAdmissionPolicy), from either
// fastfence's client (KubeApiError) or @kubernetes/client-node's (ApiException, whose body is
// the Status as JSON). Test code: it never retries or hides a refusal.
import { KubeApiError } from "../../infra/kube/client.ts";

export interface Refusal {
  status: number;
  message: string;
}

/** The refusal of `p`, or undefined when the API server admitted it; other errors are thrown. */
export async function refusal(p: Promise<unknown>): Promise<Refusal | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    if (err instanceof KubeApiError) return { status: err.status, message: err.message };
    const e = err as { code?: unknown; body?: unknown };
    if (typeof e.code !== "number") throw err;
    const body = String(e.body);
    try {
      return { status: e.code, message: (JSON.parse(body) as { message?: string }).message ?? body };
    } catch {
      return { status: e.code, message: body };
    }
  }
}
