// Kafka transport security of a process: TLS (the brokers' CA, optionally a client
// certificate) and SCRAM-SHA-512 credentials, from the FASTFENCE_KAFKA_* settings
// (infra/config.ts) and the Secret-mounted files they name. Without TLS and a client
// identity it refuses, naming the missing settings, unless FASTFENCE_KAFKA_INSECURE=true
// (then plaintext, and a warning at every start). Never logs a password, key or path
// contents; never connects anywhere.
import { readFileSync } from "node:fs";
import type { SASLOptions } from "kafkajs";
import { InvalidInputError } from "../../core/errors.ts";
import type { RuntimeConfig } from "../config.ts";
import type { Logger } from "../log.ts";

/** What the Kafka client needs: kafkajs's `ssl` and `sasl` options. Empty: plaintext. */
export interface KafkaSecurity {
  ssl?: { ca: string; cert?: string; key?: string; servername?: string };
  sasl?: Extract<SASLOptions, { mechanism: "scram-sha-512" }>;
}

type SecuritySettings = Pick<
  RuntimeConfig,
  | "FASTFENCE_KAFKA_CA_FILE"
  | "FASTFENCE_KAFKA_USERNAME"
  | "FASTFENCE_KAFKA_PASSWORD_FILE"
  | "FASTFENCE_KAFKA_CERT_FILE"
  | "FASTFENCE_KAFKA_KEY_FILE"
  | "FASTFENCE_KAFKA_INSECURE"
>;

function readSecretFile(setting: string, path: string, read: (p: string) => string): string {
  try {
    return read(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
    throw new InvalidInputError("FF_INVALID_CONFIG", "invalid Kafka security settings", [
      `${setting}: cannot read ${path} (${code})`,
    ]);
  }
}

/**
 * The security options for the bus, from the settings. Throws InvalidInputError
 * (FF_INVALID_CONFIG) naming each missing or half-given setting; with
 * FASTFENCE_KAFKA_INSECURE=true and no settings at all it returns {} (plaintext) and logs
 * a warning. Half-given settings are an error even then.
 */
export function kafkaSecurityFrom(
  cfg: SecuritySettings,
  log?: Logger,
  read: (path: string) => string = (p) => readFileSync(p, "utf8"),
): KafkaSecurity {
  const ca = cfg.FASTFENCE_KAFKA_CA_FILE;
  const user = cfg.FASTFENCE_KAFKA_USERNAME;
  const pw = cfg.FASTFENCE_KAFKA_PASSWORD_FILE;
  const cert = cfg.FASTFENCE_KAFKA_CERT_FILE;
  const key = cfg.FASTFENCE_KAFKA_KEY_FILE;
  const insecure = cfg.FASTFENCE_KAFKA_INSECURE === "true";
  const issues: string[] = [];
  if (user && !pw) issues.push("FASTFENCE_KAFKA_PASSWORD_FILE: required with FASTFENCE_KAFKA_USERNAME");
  if (pw && !user) issues.push("FASTFENCE_KAFKA_USERNAME: required with FASTFENCE_KAFKA_PASSWORD_FILE");
  if (cert && !key) issues.push("FASTFENCE_KAFKA_KEY_FILE: required with FASTFENCE_KAFKA_CERT_FILE");
  if (key && !cert) issues.push("FASTFENCE_KAFKA_CERT_FILE: required with FASTFENCE_KAFKA_KEY_FILE");
  const anything = !!(ca || user || pw || cert || key);
  if (issues.length === 0 && !anything) {
    if (insecure) {
      log?.warn(
        { incident: "none", node: "none", setting: "FASTFENCE_KAFKA_INSECURE" },
        "Kafka connection is plaintext and unauthenticated (FASTFENCE_KAFKA_INSECURE=true): any pod that reaches the brokers can forge events",
      );
      return {};
    }
    issues.push(
      "FASTFENCE_KAFKA_CA_FILE: required (TLS to the brokers)",
      "FASTFENCE_KAFKA_USERNAME and FASTFENCE_KAFKA_PASSWORD_FILE (SCRAM-SHA-512), or FASTFENCE_KAFKA_CERT_FILE and FASTFENCE_KAFKA_KEY_FILE (mutual TLS): required",
      "or FASTFENCE_KAFKA_INSECURE=true to allow a plaintext connection",
    );
  } else if (issues.length === 0) {
    if (!ca) issues.push("FASTFENCE_KAFKA_CA_FILE: required (TLS to the brokers)");
    if (!user && !cert)
      issues.push(
        "FASTFENCE_KAFKA_USERNAME and FASTFENCE_KAFKA_PASSWORD_FILE (SCRAM-SHA-512), or FASTFENCE_KAFKA_CERT_FILE and FASTFENCE_KAFKA_KEY_FILE (mutual TLS): required",
      );
  }
  if (issues.length)
    throw new InvalidInputError("FF_INVALID_CONFIG", "invalid Kafka security settings", issues);
  if (insecure)
    log?.warn(
      { incident: "none", node: "none", setting: "FASTFENCE_KAFKA_INSECURE" },
      "FASTFENCE_KAFKA_INSECURE=true is ignored: TLS and authentication settings are given",
    );
  const out: KafkaSecurity = {
    ssl: {
      ca: readSecretFile("FASTFENCE_KAFKA_CA_FILE", ca!, read),
      ...(cert && key
        ? {
            cert: readSecretFile("FASTFENCE_KAFKA_CERT_FILE", cert, read),
            key: readSecretFile("FASTFENCE_KAFKA_KEY_FILE", key, read),
          }
        : {}),
    },
  };
  if (user && pw) {
    const password = readSecretFile("FASTFENCE_KAFKA_PASSWORD_FILE", pw, read).trim();
    if (!password)
      throw new InvalidInputError("FF_INVALID_CONFIG", "invalid Kafka security settings", [
        `FASTFENCE_KAFKA_PASSWORD_FILE: ${pw} is empty`,
      ]);
    out.sasl = { mechanism: "scram-sha-512", username: user, password };
  }
  return out;
}
