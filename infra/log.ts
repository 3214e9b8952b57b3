// Structured JSON logging (pino). Every line carries the component; lines about an
// incident carry `incident` and `node` (use forIncident). Secrets never reach a log:
// known secret-bearing keys are redacted at any depth we use, and BMC drivers never
// log credentials in the first place.
import { pino, type Logger } from "pino";

export type { Logger };

const REDACT = [
  "password",
  "*.password",
  "*.*.password",
  "username",
  "*.username",
  "*.*.username",
  "authorization",
  "*.authorization",
  "*.headers.authorization",
  "*.headers['x-auth-token']",
  "token",
  "*.token",
  "credentials",
  "*.credentials",
];

export function createLogger(
  component: string,
  options: { level?: string; destination?: pino.DestinationStream } = {},
): Logger {
  const level = options.level ?? process.env.FASTFENCE_LOG_LEVEL ?? "info";
  return pino(
    {
      level,
      base: { component },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT, censor: "[redacted]" },
    },
    options.destination,
  );
}

/** A child logger whose every line names the incident and the node. */
export function forIncident(log: Logger, incident: string | undefined, node: string): Logger {
  return log.child({ incident: incident ?? "none", node });
}
