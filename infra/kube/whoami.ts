// Asks the API server who the caller is: a SelfSubjectReview (authentication.k8s.io/v1, GA
// since Kubernetes 1.28; every authenticated user may create one through the built-in
// ClusterRole system:basic-user). The answer is the user name the API server sees on the
// caller's requests, the one the admission policies compare a request's `by` with. Nothing
// is stored by the review and this module writes nothing else; it never guesses a name
// from the kubeconfig.
import { FastfenceError } from "../../core/errors.ts";
import { KubeApiError, type Kube } from "./client.ts";

/** The caller as the API server authenticated it. */
export interface Identity {
  username: string;
  groups: string[];
}

/** The API server would not say who the caller is (too old, refused, or no user name). */
export class IdentityUnknownError extends FastfenceError {
  /** The HTTP status of the refusal, when there was one. */
  readonly status: number | undefined;
  constructor(message: string, opts: { status?: number; cause?: unknown } = {}) {
    super("FF_KUBE_UNAVAILABLE", message, { cause: opts.cause });
    this.status = opts.status;
  }
}

/** Who the caller is. Throws IdentityUnknownError (or the client's error when no server answered). */
export async function whoAmI(kube: Kube): Promise<Identity> {
  let review;
  try {
    review = await kube.call("create selfsubjectreview", (a) =>
      a.authentication.createSelfSubjectReview({
        body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      }),
    );
  } catch (err) {
    if (!(err instanceof KubeApiError)) throw err;
    const why =
      err.status === 404
        ? "the API server has no SelfSubjectReview API (Kubernetes >= 1.28 has it)"
        : `the API server refused a SelfSubjectReview (HTTP ${err.status}: ${err.message})`;
    throw new IdentityUnknownError(`cannot learn your user name: ${why}`, { status: err.status, cause: err });
  }
  const user = review.status?.userInfo;
  if (!user?.username)
    throw new IdentityUnknownError("cannot learn your user name: the SelfSubjectReview named no user");
  return { username: user.username, groups: user.groups ?? [] };
}
