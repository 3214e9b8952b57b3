// BMC credentials from Kubernetes Secrets: the one place fastfence reads a credentials
// Secret (a policy level's in the fastfence namespace, a discovered level's in its
// BareMetalHost's namespace) and checks its keys "username" and "password" (metal3's
// layout). A missing or unusable key is a BmcCredentialsError that names the Secret and
// the key; a Secret that cannot be read is the API's own KubeApiError (404: not found).
// namingSecret wraps a driver built from a Secret so that a BMC's rejection of them
// (BmcAuthError) names that Secret. It reads on every call and caches nothing: keeping
// drivers per Secret content is the power executor's job (infra/fence/driver-pool.ts).
// Must never log a credential, nor put one into an error, a label or a return value other
// than the credentials handed to the driver that uses them.
import { InvalidInputError } from "../../core/errors.ts";
import type { Kube } from "../kube/client.ts";
import { BmcAuthError, type BmcCallOptions, type BmcDriver } from "./driver.ts";

export interface BmcCredentials {
  username: string;
  password: string;
}

/** A credentials Secret by namespace and name. */
export interface SecretRef {
  namespace: string;
  name: string;
}

export type CredentialsKey = "username" | "password";

/** What is wrong with one key; never the value. */
export type CredentialsProblem = "missing" | "empty" | "not-utf8" | "line-break";

const PROBLEM_TEXT: Record<CredentialsProblem, string> = {
  missing: "is missing",
  empty: "is empty",
  "not-utf8": "is not UTF-8 text",
  "line-break": "contains a line break or NUL character",
};

/** A credentials Secret without a usable username or password (FF_INVALID_CONFIG, not retriable). */
export class BmcCredentialsError extends InvalidInputError {
  /** "namespace/name" (or the name given), never a value. */
  readonly secret: string;
  /** Every key that is wrong, with what is wrong with it. */
  readonly problems: readonly { key: CredentialsKey; problem: CredentialsProblem }[];
  constructor(secret: string, problems: readonly { key: CredentialsKey; problem: CredentialsProblem }[]) {
    super(
      "FF_INVALID_CONFIG",
      `Secret ${secret} needs keys "username" and "password"`,
      problems.map((p) => `key "${p.key}" ${PROBLEM_TEXT[p.problem]}`),
    );
    this.secret = secret;
    this.problems = problems;
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** One key's value decoded, or what is wrong with it. */
function decodeKey(
  data: Record<string, string> | undefined,
  key: CredentialsKey,
): { value: string } | { problem: CredentialsProblem } {
  const b64 = data?.[key];
  if (b64 === undefined) return { problem: "missing" };
  let value: string;
  try {
    value = utf8.decode(Buffer.from(b64, "base64"));
  } catch {
    return { problem: "not-utf8" };
  }
  // A fence agent reads key=value lines, and a trailing newline (`echo pw | base64`) is
  // the usual mistake: either way the BMC would only say "wrong credentials".
  if (/[\r\n\0]/.test(value)) return { problem: "line-break" };
  if (key === "username" && value === "") return { problem: "empty" };
  return { value };
}

/**
 * Credentials from a Secret's `data` map (base64 values). An empty password is allowed
 * (some BMCs have none); an empty username is not. Throws BmcCredentialsError naming the
 * Secret and every bad key.
 */
export function credentialsFromSecretData(
  data: Record<string, string> | undefined,
  secretName: string,
): BmcCredentials {
  const username = decodeKey(data, "username");
  const password = decodeKey(data, "password");
  const problems: { key: CredentialsKey; problem: CredentialsProblem }[] = [];
  if ("problem" in username) problems.push({ key: "username", problem: username.problem });
  if ("problem" in password) problems.push({ key: "password", problem: password.problem });
  if ("value" in username && "value" in password)
    return { username: username.value, password: password.value };
  throw new BmcCredentialsError(secretName, problems);
}

/**
 * Reads and checks the credentials Secret `ref`. A read failure is the API's KubeApiError
 * (status 404 when the Secret does not exist); bad keys are a BmcCredentialsError.
 */
export async function readBmcCredentials(kube: Kube, ref: SecretRef): Promise<BmcCredentials> {
  const s = await kube.read(`read secret ${ref.namespace}/${ref.name}`, (a) =>
    a.core.readNamespacedSecret({ name: ref.name, namespace: ref.namespace }),
  );
  return credentialsFromSecretData(s.data, secretName(ref));
}

/** "namespace/name" of a Secret, for messages and logs. */
export function secretName(ref: SecretRef): string {
  return `${ref.namespace}/${ref.name}`;
}

/**
 * `driver` (built from the credentials in Secret `ref`) whose BmcAuthError names that
 * Secret: "BMC <target> rejected the credentials from Secret <namespace/name>". Every other
 * outcome passes through unchanged.
 */
export function namingSecret(driver: BmcDriver, ref: SecretRef): BmcDriver {
  const secret = secretName(ref);
  const named = <T>(call: Promise<T>): Promise<T> =>
    call.catch((err: unknown) => {
      throw err instanceof BmcAuthError && err.secret === undefined ? err.fromSecret(secret) : err;
    });
  const { prepare, cycle, close } = driver;
  return {
    kind: driver.kind,
    target: driver.target,
    status: (o: BmcCallOptions) => named(driver.status(o)),
    off: (o: BmcCallOptions) => named(driver.off(o)),
    on: (o: BmcCallOptions) => named(driver.on(o)),
    ...(cycle ? { cycle: (o: BmcCallOptions) => named(cycle.call(driver, o)) } : {}),
    ...(prepare ? { prepare: (o: BmcCallOptions) => named(prepare.call(driver, o)) } : {}),
    ...(close ? { close: () => close.call(driver) } : {}),
  };
}
