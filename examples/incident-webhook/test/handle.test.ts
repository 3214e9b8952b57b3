// The function behind the HTTP contract Knative uses, through faas-js-runtime itself (the
// runtime `kn func` builds TypeScript functions on), started as its container starts it:
// real catalog events delivered in binary mode (the Knative dispatcher's default) and in
// structured mode reach the webhook as one summary each and get 204; an invalid event gets
// 400, a valid one of another type 422, and neither reaches the webhook; a webhook that
// fails gets 503, which Knative retries; a bad WEBHOOK_URL stops the start.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { EVENT_TYPES, parseEvent } from "@fastfence/events";
import { HANDLED_TYPES } from "../src/summary.ts";
import { HANDLED_EVENTS, INCIDENT, NODE, UNHANDLED_EVENT, catalogEvent, sent, type Mode } from "./events.ts";
import { startFunction, startReceiver, type RunningFunction, type WebhookReceiver } from "./servers.ts";

let fn: RunningFunction;
let hook: WebhookReceiver;

before(async () => {
  hook = await startReceiver();
  fn = await startFunction({ WEBHOOK_URL: hook.url, WEBHOOK_TIMEOUT_MS: "2000" });
});
after(async () => {
  await fn?.stop();
  await hook?.stop();
});
beforeEach(() => {
  hook.received.length = 0;
  hook.answer(200);
});

async function deliver(req: { headers: Record<string, string>; body: string }) {
  const res = await fetch(`${fn.url}/`, { method: "POST", headers: req.headers, body: req.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: compared as text
  }
  return { status: res.status, body, text };
}

describe("events the function handles", () => {
  it("are real catalog events (parseEvent accepts each)", () => {
    assert.deepEqual(Object.keys(HANDLED_EVENTS).sort(), [...HANDLED_TYPES].sort());
    for (const ev of Object.values(HANDLED_EVENTS)) assert.equal(parseEvent(ev).type, ev.type);
  });

  for (const mode of ["binary", "structured"] as Mode[]) {
    for (const type of HANDLED_TYPES) {
      it(`${type} in ${mode} mode: 204 and one summary posted`, async () => {
        const ev = HANDLED_EVENTS[type];
        const res = await deliver(sent(ev, mode));
        assert.equal(res.status, 204, `${res.status} ${res.text}\n${fn.output()}`);
        assert.equal(hook.received.length, 1);
        const got = hook.received[0]!;
        assert.match(String(got.headers["content-type"]), /^application\/json/);
        const body = got.body as Record<string, unknown>;
        assert.equal(body.type, type);
        assert.equal(body.id, ev.id);
        assert.equal(body.node, NODE);
        assert.equal(body.incident, INCIDENT);
        assert.match(String(body.text), new RegExp(`^fastfence: .*${NODE}`));
        assert.doesNotMatch(String(body.text), /\n/);
      });
    }
  }

  it("a redelivery (same id) is posted again with the same id, for the receiver to drop", async () => {
    const req = sent(HANDLED_EVENTS[EVENT_TYPES.workloadsReleased], "binary");
    assert.equal((await deliver(req)).status, 204);
    assert.equal((await deliver(req)).status, 204);
    const ids = hook.received.map((r) => (r.body as { id: string }).id);
    assert.deepEqual(ids, [ids[0], ids[0]]);
  });
});

describe("input it refuses, without calling the webhook", () => {
  const released = HANDLED_EVENTS[EVENT_TYPES.workloadsReleased];
  const cases: [string, Record<string, unknown>, number, RegExp][] = [
    [
      "data that breaks the schema",
      { ...released, data: { ...released.data, podsDeleted: -1 } },
      400,
      /data\.podsDeleted/,
    ],
    [
      "data about another node than the subject",
      { ...released, subject: "worker-9" },
      400,
      /must equal subject/,
    ],
    [
      "an unknown fastfence type",
      { ...released, type: "io.fastfence.node.vanished.v1" },
      400,
      /unknown event type/,
    ],
    ["a source that is not fastfence's", { ...released, source: "/somewhere/else" }, 400, /^source/m],
    [
      "a valid event of a type it does not handle",
      { ...UNHANDLED_EVENT },
      422,
      /io\.fastfence\.fence\.requested\.v1/,
    ],
  ];
  for (const [name, ev, status, issue] of cases) {
    for (const mode of ["binary", "structured"] as Mode[]) {
      it(`${name} (${mode}): ${status} naming it`, async () => {
        const res = await deliver(sent(ev, mode));
        assert.equal(res.status, status, res.text);
        const issues = (res.body as { issues: string[] }).issues;
        assert.ok(
          issues.some((i) => issue.test(i)),
          `issues: ${JSON.stringify(issues)}`,
        );
        assert.equal(hook.received.length, 0);
      });
    }
  }

  it("a POST that is not a CloudEvent: 400", async () => {
    const res = await deliver({ headers: { "content-type": "application/json" }, body: '{"hello":"world"}' });
    assert.equal(res.status, 400, res.text);
    assert.match(res.text, /not a CloudEvent/);
    assert.equal(hook.received.length, 0);
  });

  it("a CloudEvent envelope faas-js-runtime refuses (no id) never reaches the function", async () => {
    const { headers, body } = sent(released, "binary");
    delete headers["ce-id"];
    const res = await deliver({ headers, body });
    assert.ok(res.status >= 400, `${res.status} ${res.text}`);
    assert.equal(hook.received.length, 0);
  });

  it("binary mode with a body that is not JSON: 4xx", async () => {
    const { headers } = sent(released, "binary");
    const res = await deliver({ headers, body: "{not json" });
    assert.ok(res.status >= 400 && res.status < 500, `${res.status} ${res.text}`);
    assert.equal(hook.received.length, 0);
  });
});

describe("a webhook that does not take the summary", () => {
  it("gets 503 (Knative retries), and the retry that finds it back gets 204", async () => {
    const req = sent(HANDLED_EVENTS[EVENT_TYPES.fenceFailed], "binary");
    hook.answer(500);
    const first = await deliver(req);
    assert.equal(first.status, 503, first.text);
    assert.match(first.text, /answered 500/);
    assert.doesNotMatch(first.text, /hooks\/fastfence/, "the answer never shows the webhook's path");
    hook.answer(200);
    assert.equal((await deliver(req)).status, 204);
    assert.equal(hook.received.length, 2);
  });
});

describe("configuration", () => {
  for (const [name, env, message] of [
    ["no WEBHOOK_URL", { WEBHOOK_URL: undefined }, /WEBHOOK_URL is not set/],
    ["a WEBHOOK_URL that is not http", { WEBHOOK_URL: "ftp://example.invalid/x" }, /must be http or https/],
  ] as const) {
    it(`${name}: the process stops at start, saying why`, async () => {
      const bad = await startFunction(env);
      try {
        const code = await Promise.race([
          bad.exited,
          new Promise<string>((r) => setTimeout(() => r("still running"), 10_000)),
        ]);
        assert.notEqual(code, 0, bad.output());
        assert.notEqual(code, "still running", bad.output());
        assert.match(bad.output(), message);
      } finally {
        await bad.stop();
      }
    });
  }
});

describe("catalogEvent", () => {
  it("names the emitter the catalog gives for the type", () => {
    const ev = catalogEvent(EVENT_TYPES.nodeRecovered, HANDLED_EVENTS[EVENT_TYPES.nodeRecovered].data);
    assert.match(ev.source, /^\/fastfence\/recover\//);
  });
});
