// The bus's transport security settings (infra/bus/kafka-security.ts, FASTFENCE_KAFKA_*
// of infra/config.ts): without TLS and a client identity a process refuses to start with
// an error naming the missing settings; FASTFENCE_KAFKA_INSECURE=true allows plaintext and
// warns at every start; secrets come from files and never reach the log.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import { kafkaSecurityFrom } from "../../../infra/bus/kafka-security.ts";
import { loadRuntimeConfig } from "../../../infra/config.ts";
import { createLogger } from "../../../infra/log.ts";

const dir = mkdtempSync(join(tmpdir(), "ff-kafka-sec-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const CA = file("ca.crt", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
const PW = file("password", "s3cret-pw\n");

function capture() {
  const lines: string[] = [];
  const log = createLogger("test", {
    level: "debug",
    destination: { write: (l: string) => void lines.push(l) },
  });
  return { log, lines };
}

function refusal(env: Record<string, string>): InvalidInputError {
  try {
    kafkaSecurityFrom(loadRuntimeConfig(env));
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("Kafka security settings", () => {
  it("no settings at all: refused, naming the CA, the credentials and the insecure switch", () => {
    const err = refusal({});
    expect(err.code).toBe("FF_INVALID_CONFIG");
    expect(err.issues.join("\n")).toContain("FASTFENCE_KAFKA_CA_FILE");
    expect(err.issues.join("\n")).toContain("FASTFENCE_KAFKA_USERNAME");
    expect(err.issues.join("\n")).toContain("FASTFENCE_KAFKA_INSECURE=true");
  });

  it("half-given settings are refused, each naming its missing partner", () => {
    expect(
      refusal({ FASTFENCE_KAFKA_CA_FILE: CA, FASTFENCE_KAFKA_USERNAME: "fastfence-detect" }).issues,
    ).toEqual(["FASTFENCE_KAFKA_PASSWORD_FILE: required with FASTFENCE_KAFKA_USERNAME"]);
    expect(refusal({ FASTFENCE_KAFKA_USERNAME: "u", FASTFENCE_KAFKA_PASSWORD_FILE: PW }).issues).toEqual([
      "FASTFENCE_KAFKA_CA_FILE: required (TLS to the brokers)",
    ]);
    expect(refusal({ FASTFENCE_KAFKA_CA_FILE: CA, FASTFENCE_KAFKA_CERT_FILE: CA }).issues).toEqual([
      "FASTFENCE_KAFKA_KEY_FILE: required with FASTFENCE_KAFKA_CERT_FILE",
    ]);
    // a CA alone authenticates nobody
    expect(refusal({ FASTFENCE_KAFKA_CA_FILE: CA }).issues[0]).toContain("FASTFENCE_KAFKA_USERNAME");
    // insecure does not excuse half-given settings
    expect(refusal({ FASTFENCE_KAFKA_INSECURE: "true", FASTFENCE_KAFKA_USERNAME: "u" }).issues).toContain(
      "FASTFENCE_KAFKA_PASSWORD_FILE: required with FASTFENCE_KAFKA_USERNAME",
    );
  });

  it("an unreadable or empty secret file is refused with the setting and path, not the content", () => {
    const missing = join(dir, "nope");
    const err = refusal({
      FASTFENCE_KAFKA_CA_FILE: CA,
      FASTFENCE_KAFKA_USERNAME: "u",
      FASTFENCE_KAFKA_PASSWORD_FILE: missing,
    });
    expect(err.issues).toEqual([`FASTFENCE_KAFKA_PASSWORD_FILE: cannot read ${missing} (ENOENT)`]);
    const empty = file("empty", "\n");
    expect(
      refusal({
        FASTFENCE_KAFKA_CA_FILE: CA,
        FASTFENCE_KAFKA_USERNAME: "u",
        FASTFENCE_KAFKA_PASSWORD_FILE: empty,
      }).issues,
    ).toEqual([`FASTFENCE_KAFKA_PASSWORD_FILE: ${empty} is empty`]);
  });

  it("TLS + SCRAM from files: the CA and the password (trailing newline dropped), nothing logged", () => {
    const { log, lines } = capture();
    const sec = kafkaSecurityFrom(
      loadRuntimeConfig({
        FASTFENCE_KAFKA_CA_FILE: CA,
        FASTFENCE_KAFKA_USERNAME: "fastfence-detect",
        FASTFENCE_KAFKA_PASSWORD_FILE: PW,
      }),
      log,
    );
    expect(sec).toEqual({
      ssl: { ca: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" },
      sasl: { mechanism: "scram-sha-512", username: "fastfence-detect", password: "s3cret-pw" },
    });
    expect(lines).toEqual([]);
  });

  it("mutual TLS: client certificate and key", () => {
    const sec = kafkaSecurityFrom(
      loadRuntimeConfig({
        FASTFENCE_KAFKA_CA_FILE: CA,
        FASTFENCE_KAFKA_CERT_FILE: file("user.crt", "CERT"),
        FASTFENCE_KAFKA_KEY_FILE: file("user.key", "KEY"),
      }),
    );
    expect(sec.ssl).toMatchObject({ cert: "CERT", key: "KEY" });
    expect(sec.sasl).toBeUndefined();
  });

  it("FASTFENCE_KAFKA_INSECURE=true: plaintext, with a warning at every start", () => {
    for (let start = 0; start < 2; start++) {
      const { log, lines } = capture();
      expect(kafkaSecurityFrom(loadRuntimeConfig({ FASTFENCE_KAFKA_INSECURE: "true" }), log)).toEqual({});
      expect(lines).toHaveLength(1);
      const line = JSON.parse(lines[0]!) as { level: string; setting: string; msg: string };
      expect(line.level).toBe("warn");
      expect(line.setting).toBe("FASTFENCE_KAFKA_INSECURE");
    }
  });

  it("FASTFENCE_KAFKA_INSECURE takes only true or false", () => {
    expect(() => loadRuntimeConfig({ FASTFENCE_KAFKA_INSECURE: "yes" })).toThrow(InvalidInputError);
  });
});
