// incident-webhook: a Knative Function (faas-js-runtime, the runtime `kn func` uses for
// TypeScript) that reacts to fastfence events off the critical path. A Trigger on the
// fastfence Broker delivers each event of the HANDLED_TYPES; `handle` validates it with the
// catalog of @fastfence/events (parseEvent: envelope, data schema, subject) and POSTs a
// one-line JSON summary to WEBHOOK_URL. Answers, as the Knative dispatcher reads them:
// 204 done; 400 not a valid fastfence event, 422 a valid one of a type it does not handle
// (neither is retried: the Trigger's dead-letter sink keeps it); 503 the webhook did not
// take it (retried with backoff). It never throws on bad input and never logs WEBHOOK_URL,
// which often carries a token.
import type { CloudEvent } from "cloudevents";
import type { Context, StructuredReturn } from "faas-js-runtime";
import { InvalidInputError, parseEvent, type AnyFfEvent } from "@fastfence/events";
import { HANDLED_TYPES, isHandled, summarize, type Summary } from "./summary.ts";

export interface Config {
  /** Where summaries go (http or https). */
  url: URL;
  /** Per-POST timeout, ms: below the Trigger's delivery timeout, so a retry can follow. */
  timeoutMs: number;
}

export const DEFAULT_TIMEOUT_MS = 5000;

/** Reads the configuration from the environment; throws naming what is wrong. */
export function readConfig(env: NodeJS.ProcessEnv): Config {
  const raw = env.WEBHOOK_URL;
  if (!raw) throw new Error("WEBHOOK_URL is not set: the URL summaries are posted to");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error("WEBHOOK_URL is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`WEBHOOK_URL must be http or https, not ${url.protocol}`);
  const timeout = env.WEBHOOK_TIMEOUT_MS ? Number(env.WEBHOOK_TIMEOUT_MS) : DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeout) || timeout <= 0)
    throw new Error("WEBHOOK_TIMEOUT_MS must be a positive whole number of milliseconds");
  return { url, timeoutMs: timeout };
}

let config: Config | undefined;

/** faas-js-runtime calls this once before it listens: a bad setting stops the start. */
export function init(): void {
  config = readConfig(process.env);
}

/** A JSON answer the Knative dispatcher will not mistake for success. */
function refuse(statusCode: number, error: string, issues: readonly string[]): StructuredReturn {
  return { statusCode, headers: { "content-type": "application/json" }, body: { error, issues } };
}

/** POSTs the summary; throws if the webhook cannot be reached or answers other than 2xx. */
async function post(cfg: Config, summary: Summary): Promise<void> {
  const res = await fetch(cfg.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(summary),
    signal: AbortSignal.timeout(cfg.timeoutMs),
  });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`the webhook answered ${res.status}`);
}

/**
 * The function: called by faas-js-runtime with each request, `cloudevent` set when the
 * request is a CloudEvent (binary or structured mode, as Knative delivers them).
 */
export async function handle(
  context: Context,
  cloudevent?: CloudEvent<unknown>,
): Promise<StructuredReturn | undefined> {
  // faas-js-runtime calls the same export for a plain HTTP request, with the body in place
  // of the event: only `context.cloudevent` says whether a CloudEvent arrived.
  if (!context.cloudevent || !cloudevent)
    return refuse(400, "not a CloudEvent", [
      "expected ce-* headers (binary mode) or content-type application/cloudevents+json (structured mode)",
    ]);
  let event: AnyFfEvent;
  try {
    // Own attributes only: `toJSON` would throw on a time the Date parser refuses.
    event = parseEvent({ ...cloudevent });
  } catch (err) {
    // parseEvent throws InvalidInputError, whose `code` is a string ("FF_INVALID_EVENT"):
    // thrown to faas-js-runtime it would become a 500, which Knative retries for nothing.
    if (err instanceof InvalidInputError) return refuse(400, "invalid fastfence event", err.issues);
    throw err;
  }
  if (!isHandled(event))
    return refuse(422, "unhandled event type", [
      `type: ${event.type} is not one of ${HANDLED_TYPES.join(", ")}; check the Trigger's filter`,
    ]);
  const summary = summarize(event);
  const cfg = (config ??= readConfig(process.env));
  try {
    await post(cfg, summary);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    context.log.warn(`incident-webhook: ${event.type} ${event.id} not delivered to ${cfg.url.host}: ${why}`);
    return refuse(503, "webhook unavailable", [`${cfg.url.host}: ${why}`]);
  }
  context.log.info(`incident-webhook: ${event.type} ${event.id} (${summary.node}) posted`);
  return undefined;
}
