// BMC credentials from a Secret's data (infra/bmc/credentials.ts): both keys decoded,
// every missing or unusable key named in a typed error with the Secret's name, and no
// credential value ever in the error.
import { describe, expect, it } from "vitest";
import { FastfenceError } from "../../../core/errors.ts";
import { BmcCredentialsError, credentialsFromSecretData } from "../../../infra/bmc/credentials.ts";

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");
const SECRET = "Pw-7hQ2-secret";

function failure(data: Record<string, string> | undefined): BmcCredentialsError {
  try {
    credentialsFromSecretData(data, "metal3/worker-1-bmc");
  } catch (err) {
    if (err instanceof BmcCredentialsError) return err;
    throw err;
  }
  throw new Error("expected a BmcCredentialsError");
}

describe("credentialsFromSecretData", () => {
  it("decodes username and password; an empty password is allowed", () => {
    expect(credentialsFromSecretData({ username: b64("admin"), password: b64(SECRET) }, "s")).toEqual({
      username: "admin",
      password: SECRET,
    });
    expect(credentialsFromSecretData({ username: b64("admin"), password: "" }, "s")).toEqual({
      username: "admin",
      password: "",
    });
  });

  it.each([
    [
      "no data at all",
      undefined,
      [
        ["username", "missing"],
        ["password", "missing"],
      ],
    ],
    ["no password key", { username: b64("admin") }, [["password", "missing"]]],
    ["empty username", { username: "", password: b64(SECRET) }, [["username", "empty"]]],
    [
      "a trailing newline (echo pw | base64)",
      { username: b64("admin"), password: b64(`${SECRET}\n`) },
      [["password", "line-break"]],
    ],
    [
      "bytes that are not UTF-8",
      { username: b64(Buffer.from([0xff, 0xfe])), password: b64(SECRET) },
      [["username", "not-utf8"]],
    ],
  ] as const)("%s: a typed error naming the Secret and each bad key", (_, data, want) => {
    const err = failure(data as Record<string, string> | undefined);
    expect(err).toBeInstanceOf(FastfenceError);
    expect(err.code).toBe("FF_INVALID_CONFIG");
    expect(err.retriable).toBe(false);
    expect(err.secret).toBe("metal3/worker-1-bmc");
    expect(err.problems.map((p) => [p.key, p.problem])).toEqual(want);
    expect(err.message).toMatch(/^Secret metal3\/worker-1-bmc needs keys "username" and "password": key "/);
    for (const [key] of want) expect(err.message).toContain(`key "${key}"`);
    const shown = [err.message, JSON.stringify(err.toJSON()), String(err.stack)].join("\n");
    expect(shown).not.toContain(SECRET);
    expect(shown).not.toContain(b64(SECRET));
  });
});
