// BMC driver that runs an installed ClusterLabs fence agent (fence_ipmilan, fence_redfish,
// fence_ilo*, fence_idrac, PDUs...) through its standard stdin interface: one key=value per
// line (action=, ip=, ipport=, username=, password=, plus agent options), and its exit
// codes (status: 0 = on, 2 = off, anything else = error; other actions: 0 = success).
// The password goes only through stdin, never argv or the environment; agent output that
// ends up in an error is scrubbed of the credentials. Each run has a timeout and honours
// cancellation by killing the agent's whole process group.
import { spawn } from "node:child_process";
import path from "node:path";
import { CancelledError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";
import {
  BmcAuthError,
  BmcProtocolError,
  BmcStillOnError,
  BmcTimeoutError,
  BmcUnreachableError,
  BmcUnsupportedError,
  type BmcCallOptions,
  type BmcDriver,
  type PowerStatus,
} from "./driver.ts";

export type FenceAgentAction = "off" | "on" | "status" | "reboot" | "monitor" | "metadata" | "validate-all";

export interface FenceAgentOptions {
  /** Agent name on PATH (fence_ipmilan) or an absolute path. Must start with "fence_". */
  agent: string;
  username?: string;
  password?: string;
  /** Agent parameters without credentials, e.g. { ip: "10.0.0.5", ipport: "623", lanplus: "1", cipher: "3" }. */
  params: Record<string, string | number | boolean>;
  /** Where agents are looked up when `agent` is a bare name (default: PATH plus /usr/sbin). */
  searchPath?: string;
  log?: Logger;
}

export interface AgentRun {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** fencing.py's fail() messages (fence-agents 4.x), in precedence order. */
const AGENT_PHRASES: [string, "auth" | "unreachable" | "still-on" | "protocol"][] = [
  ["Unable to connect/login to fencing device", "auth"],
  ["does not have the correct privileges", "auth"],
  ["You have to set login password", "auth"],
  ["Timed out waiting to power OFF", "still-on"],
  ["Connection lost", "unreachable"],
  ["Connection timed out", "unreachable"],
];

const SECRET_KEYS = new Set(["password", "passwd", "username", "login", "password_script", "passwd_script"]);

/** Builds the stdin document; exported for unit tests. Rejects newlines that would inject keys. */
export function agentStdin(action: FenceAgentAction, opts: FenceAgentOptions): string {
  const lines = [`action=${action}`];
  for (const [k, v] of Object.entries(opts.params)) {
    if (SECRET_KEYS.has(k))
      throw new BmcUnsupportedError(opts.agent, `credential key "${k}" belongs in username/password`);
    const s = typeof v === "boolean" ? (v ? "1" : "0") : String(v);
    if (/[\r\n]/.test(k + s) || !/^[a-z0-9_-]+$/i.test(k))
      throw new BmcUnsupportedError(opts.agent, `bad parameter "${k}"`);
    lines.push(`${k}=${s}`);
  }
  for (const [k, v] of [
    ["username", opts.username],
    ["password", opts.password],
  ] as const) {
    if (v === undefined) continue;
    if (/[\r\n]/.test(v)) throw new BmcUnsupportedError(opts.agent, `${k} contains a newline`);
    lines.push(`${k}=${v}`);
  }
  return lines.join("\n") + "\n";
}

/** Removes every occurrence of the secrets from agent output. */
export function scrub(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 2) out = out.split(s).join("[redacted]");
  return out;
}

export class FenceAgentDriver implements BmcDriver {
  readonly kind: string;
  readonly target: string;
  private readonly opts: FenceAgentOptions;

  constructor(opts: FenceAgentOptions) {
    if (!/^fence_[a-z0-9_]+$/.test(path.basename(opts.agent))) {
      throw new BmcUnsupportedError(opts.agent, "fence agent names start with fence_");
    }
    this.opts = opts;
    this.kind = path.basename(opts.agent);
    const ip = opts.params.ip ?? opts.params.ipaddr ?? "?";
    const port = opts.params.ipport ? `:${opts.params.ipport}` : "";
    this.target = `${this.kind}://${ip}${port}`;
  }

  async status(opts: BmcCallOptions): Promise<PowerStatus> {
    const r = await this.run("status", opts);
    if (r.code === 0) return { state: "on", raw: "exit 0 (on)" };
    if (r.code === 2) return { state: "off", raw: "exit 2 (off)" };
    throw this.failure("status", r);
  }

  async off(opts: BmcCallOptions): Promise<void> {
    const r = await this.run("off", opts);
    if (r.code !== 0) throw this.failure("off", r);
  }

  async on(opts: BmcCallOptions): Promise<void> {
    const r = await this.run("on", opts);
    if (r.code !== 0) throw this.failure("on", r);
  }

  async cycle(opts: BmcCallOptions): Promise<void> {
    const r = await this.run("reboot", opts);
    if (r.code !== 0) throw this.failure("reboot", r);
  }

  /** monitor: 0 = the device answers. */
  async monitor(opts: BmcCallOptions): Promise<void> {
    const r = await this.run("monitor", opts);
    if (r.code !== 0) throw this.failure("monitor", r);
  }

  /** The agent's XML self-description. */
  async metadata(opts: BmcCallOptions): Promise<string> {
    const r = await this.run("metadata", opts);
    if (r.code !== 0) throw this.failure("metadata", r);
    return r.stdout;
  }

  /** validate-all: checks the parameters without touching the device. */
  async validate(opts: BmcCallOptions): Promise<void> {
    const r = await this.run("validate-all", opts);
    if (r.code !== 0) throw this.failure("validate-all", r);
  }

  private failure(action: string, r: AgentRun): Error {
    const text = scrub(`${r.stderr}\n${r.stdout}`, [this.opts.password, this.opts.username]);
    const last = text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .slice(-2)
      .join(" | ")
      .slice(0, 300);
    const detail = `${this.kind} ${action} exited ${r.code ?? r.signal}${last ? `: ${last}` : ""}`;
    // Agents exit 1 for every failure; the kind is in fencing.py's fixed phrases (its fail()).
    for (const [phrase, kind] of AGENT_PHRASES) {
      if (!text.includes(phrase)) continue;
      if (kind === "auth") return new BmcAuthError(this.target);
      if (kind === "unreachable") return new BmcUnreachableError(this.target, detail);
      if (kind === "still-on") return new BmcStillOnError(this.target, 0, undefined);
      break;
    }
    return new BmcProtocolError(this.target, detail);
  }

  /** Runs one agent action; rejects only on timeout, cancellation or spawn failure. */
  run(action: FenceAgentAction, opts: BmcCallOptions): Promise<AgentRun> {
    const stdin = agentStdin(action, this.opts);
    const env: NodeJS.ProcessEnv = {
      PATH: this.opts.searchPath ?? `${process.env.PATH ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`,
      LANG: "C.UTF-8",
      HOME: process.env.HOME,
    };
    if (opts.signal?.aborted)
      return Promise.reject(new CancelledError(`${this.kind} ${action}`, opts.signal.reason));
    return new Promise<AgentRun>((resolve, reject) => {
      const child = spawn(this.opts.agent, [], { env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let settled = false;
      const killGroup = () => {
        if (child.pid) {
          try {
            process.kill(-child.pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
      };
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        fn();
      };
      const timer = setTimeout(() => {
        killGroup();
        finish(() => reject(new BmcTimeoutError(this.target, `${this.kind} ${action}`, opts.timeoutMs)));
      }, opts.timeoutMs);
      const onAbort = () => {
        killGroup();
        finish(() => reject(new CancelledError(`${this.kind} ${action}`, opts.signal?.reason)));
      };
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      child.stdout.on("data", (c: Buffer) => out.push(c));
      child.stderr.on("data", (c: Buffer) => err.push(c));
      child.on("error", (e: NodeJS.ErrnoException) =>
        finish(() =>
          reject(
            e.code === "ENOENT"
              ? new BmcUnsupportedError(this.target, `fence agent ${this.kind} is not installed`)
              : new BmcProtocolError(this.target, `cannot run ${this.kind}: ${e.code ?? "error"}`),
          ),
        ),
      );
      child.on("close", (code, signal) =>
        finish(() =>
          resolve({
            code,
            signal,
            stdout: Buffer.concat(out).toString("utf8"),
            stderr: Buffer.concat(err).toString("utf8"),
          }),
        ),
      );
      child.stdin.on("error", () => {
        // the agent may exit before reading all of stdin
      });
      child.stdin.end(stdin);
      this.opts.log?.debug({ agent: this.kind, action, target: this.target }, "fence agent run");
    });
  }
}
