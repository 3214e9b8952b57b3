// Builds dead-letter records: the reason, the error code, where the original came from
// and the original bytes and headers, so nothing received is ever lost (S5). Pure.
import type { FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";

export interface DeadLetterOrigin {
  function: string;
  transport: "kafka" | "http";
  topic?: string;
  partition?: number;
  offset?: string;
}

export interface DeadLetter {
  reason: string;
  code: string;
  issues: readonly string[];
  origin: DeadLetterOrigin;
  /** Original value, base64 (null when the original had none). */
  originalBase64: string | null;
  originalHeaders: Record<string, string>;
  deadLetteredAt: string;
}

export function deadLetterRecord(
  error: FastfenceError,
  original: { value: Buffer | null; headers: Record<string, string>; key: string | null },
  origin: DeadLetterOrigin,
  nowMs: number,
): KafkaRecord {
  const issues = "issues" in error && Array.isArray(error.issues) ? (error.issues as string[]) : [];
  const body: DeadLetter = {
    reason: error.message,
    code: error.code,
    issues,
    origin,
    originalBase64: original.value ? original.value.toString("base64") : null,
    originalHeaders: original.headers,
    deadLetteredAt: new Date(nowMs).toISOString(),
  };
  return {
    key: original.key,
    value: Buffer.from(JSON.stringify(body)),
    headers: {
      "content-type": "application/json",
      "fastfence-dlq-code": error.code,
      "fastfence-dlq-function": origin.function,
    },
  };
}
