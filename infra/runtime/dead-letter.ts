// Builds dead-letter records in the catalog's DeadLetter shape (events/schemas.ts): the
// reason and error code (and, for an event a stage rejected, the outcome's stable reason
// code), which consumer gave up, where the original came from, and the original bytes and
// headers — so nothing received is ever lost (S5). Pure.
import { RejectedEventError, type FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { DeadLetter } from "../../events/schemas.ts";

export interface DeadLetterOrigin {
  /** "<function>/<replica>" */
  consumer: string;
  topic: string;
  partition: number;
  offset: string;
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
    ...(error instanceof RejectedEventError ? { reasonCode: error.reasonCode } : {}),
    ...(issues.length ? { issues } : {}),
    ...origin,
    ...(original.key !== null ? { key: original.key } : {}),
    originalBase64: original.value ? original.value.toString("base64") : "",
    originalHeaders: original.headers,
    failedAt: new Date(nowMs).toISOString(),
  };
  return {
    key: original.key,
    value: Buffer.from(JSON.stringify(body)),
    headers: {
      "content-type": "application/json",
      "fastfence-dlq-code": error.code,
      ...(error instanceof RejectedEventError ? { "fastfence-dlq-reason-code": error.reasonCode } : {}),
      "fastfence-dlq-consumer": origin.consumer,
    },
  };
}
