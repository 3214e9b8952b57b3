// The two servers the tests talk to, both on loopback only: the function itself, run the
// way its container runs it (`npm start`: the faas-js-runtime command on build/src/index.js)
// as a child process on a free port, and a webhook receiver that records what it is sent.
// Every process started here is stopped by `stop()`, by its own pid.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { join } from "node:path";

/** The example's folder (this file runs from build/test/). */
export const ROOT = join(import.meta.dirname, "..", "..");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** The function module `npm start` serves, read from package.json's start script. */
export function startScriptTarget(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: { start: string } };
  const m = /^faas-js-runtime (\S+)$/.exec(pkg.scripts.start);
  if (!m) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return m[1]!;
}

export interface RunningFunction {
  url: string;
  /** What the process printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the exit code once the process has ended (null: killed by a signal). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Starts faas-js-runtime on the built function; resolves when /health/readiness answers 200. */
export async function startFunction(env: Record<string, string | undefined>): Promise<RunningFunction> {
  const port = await freePort();
  const cli = createRequire(import.meta.url).resolve("faas-js-runtime/bin/cli.js");
  const childEnv: NodeJS.ProcessEnv = { ...process.env, FUNC_LOG_LEVEL: "warn" };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  const child: ChildProcess = spawn(process.execPath, [cli, startScriptTarget(), "--port", String(port)], {
    cwd: ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const running: RunningFunction = { url, output: () => out, exited, stop };
  const deadline = Date.now() + 20_000;
  let ended = false;
  void exited.then(() => (ended = true));
  while (!ended && Date.now() < deadline) {
    const ok = await fetch(`${url}/health/readiness`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return running;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (ended) return running; // the caller looks at the exit code and the output
  await stop();
  throw new Error(`faas-js-runtime did not become ready in 20 s:\n${out}`);
}

export interface Received {
  headers: IncomingHttpHeaders;
  body: unknown;
}

export interface WebhookReceiver {
  url: string;
  received: Received[];
  /** The status it answers with from now on (200 unless told otherwise). */
  answer(status: number): void;
  stop(): Promise<void>;
}

/** A webhook endpoint on 127.0.0.1 that records every JSON body POSTed to it. */
export async function startReceiver(): Promise<WebhookReceiver> {
  const received: Received[] = [];
  let status = 200;
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      let parsed: unknown = body;
      try {
        parsed = JSON.parse(body);
      } catch {
        // kept as text: the test shows what arrived
      }
      received.push({ headers: req.headers, body: parsed });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/fastfence`,
    received,
    answer: (s) => void (status = s),
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
