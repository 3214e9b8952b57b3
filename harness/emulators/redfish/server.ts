// The lab Redfish emulator (harness code, not product code): a small DMTF Redfish service
// with one ComputerSystem whose ForceOff/On call hooks (kill or start the simulated
// node's processes), session and basic auth, and fault injection switches: added
// latency, HTTP 5xx, auth failure, stuck in PoweringOff, "lying" (reports Off while the
// node still runs; the off hook is not called) and unreachable (stops listening). Its one
// account's password can be changed as on a real BMC (PATCH
// /redfish/v1/AccountService/Accounts/1 {"Password"}), which ends every open session.
// Shared by the tests, the lab and the benches; it must never be imported by the pipeline
// (core/, functions/, events/, infra/, source/), and never listens beyond loopback and the
// lab bridge.
import { randomBytes, timingSafeEqual } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";

export type LabPowerState = "On" | "Off" | "PoweringOn" | "PoweringOff";

export interface LabRedfishHooks {
  /** Called on ForceOff/PowerOff/GracefulShutdown; state becomes Off once it resolves. */
  powerOff?: () => Promise<void> | void;
  /** Called on On/ForceOn; state becomes On once it resolves. */
  powerOn?: () => Promise<void> | void;
}

export interface LabRedfishFaults {
  /** Added to every response. */
  latencyMs: number;
  /** Every request (except the service root when false) answers this 5xx status. 0 = off. */
  http5xx: number;
  /** Every credential check fails. */
  authFail: boolean;
  /** ForceOff moves to PoweringOff and stays there; the hook is not called. */
  stuckPoweringOff: boolean;
  /** ForceOff reports Off at once without calling the hook: the node keeps running. */
  lie: boolean;
}

export interface LabRedfishOptions {
  username: string;
  password: string;
  systemId?: string;
  host?: string;
  port?: number;
  tls?: { cert: string | Buffer; key: string | Buffer };
  initialPower?: "On" | "Off";
  hooks?: LabRedfishHooks;
  /** Offer a SessionService (default true). */
  sessions?: boolean;
}

export interface LabRedfishStats {
  requests: number;
  resets: { type: string; at: number }[];
  offHookCalls: number;
  onHookCalls: number;
  /** Authorization headers / session bodies seen (for the "no secret leaks" tests they stay here only). */
  authFailures: number;
}

const ALLOWED = ["On", "ForceOff", "GracefulShutdown", "ForceRestart", "PowerCycle", "Nmi", "ForceOn"];

function eq(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class LabRedfishServer {
  readonly faults: LabRedfishFaults = {
    latencyMs: 0,
    http5xx: 0,
    authFail: false,
    stuckPoweringOff: false,
    lie: false,
  };
  readonly stats: LabRedfishStats = {
    requests: 0,
    resets: [],
    offHookCalls: 0,
    onHookCalls: 0,
    authFailures: 0,
  };
  power: LabPowerState;
  private readonly opts: LabRedfishOptions;
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly sessions = new Map<string, string>();
  private nextSession = 1;
  /** The account's password: opts.password until a PATCH of the account changes it. */
  private password: string;
  private boundPort = 0;
  private listening = false;
  readonly systemId: string;

  constructor(opts: LabRedfishOptions) {
    this.opts = opts;
    this.systemId = opts.systemId ?? "node-1";
    this.password = opts.password;
    this.power = opts.initialPower ?? "On";
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => void this.handle(req, res);
    this.server = opts.tls
      ? https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, handler)
      : http.createServer(handler);
    this.server.keepAliveTimeout = 30_000;
    this.server.on(opts.tls ? "secureConnection" : "connection", (s: Socket) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  get port(): number {
    return this.boundPort;
  }

  get url(): string {
    return `${this.opts.tls ? "https" : "http"}://127.0.0.1:${this.boundPort}`;
  }

  get systemPath(): string {
    return `/redfish/v1/Systems/${this.systemId}`;
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.boundPort || this.opts.port || 0, this.opts.host ?? "127.0.0.1", () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    this.boundPort = (this.server.address() as AddressInfo).port;
    this.listening = true;
  }

  /** Fault: stop listening and drop every connection (true), or listen again on the same port (false). */
  async setUnreachable(unreachable: boolean): Promise<void> {
    if (unreachable && this.listening) {
      this.listening = false;
      const closed = new Promise<void>((r) => this.server.close(() => r()));
      for (const s of this.sockets) s.destroy();
      await closed;
    } else if (!unreachable && !this.listening) {
      await this.start();
    }
  }

  async stop(): Promise<void> {
    await this.setUnreachable(true);
  }

  resetFaults(): void {
    Object.assign(this.faults, {
      latencyMs: 0,
      http5xx: 0,
      authFail: false,
      stuckPoweringOff: false,
      lie: false,
    });
  }

  private authorized(req: http.IncomingMessage): boolean {
    if (this.faults.authFail) return false;
    const tok = req.headers["x-auth-token"];
    if (typeof tok === "string" && this.sessions.has(tok)) return true;
    const auth = req.headers.authorization;
    if (typeof auth === "string" && auth.startsWith("Basic ")) {
      const dec = Buffer.from(auth.slice(6), "base64").toString("utf8");
      const i = dec.indexOf(":");
      return i >= 0 && eq(dec.slice(0, i), this.opts.username) && eq(dec.slice(i + 1), this.password);
    }
    return false;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    this.stats.requests++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    if (this.faults.latencyMs > 0) await new Promise((r) => setTimeout(r, this.faults.latencyMs));
    const send = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
      const payload = body === undefined ? "" : JSON.stringify(body);
      res.writeHead(status, {
        "Content-Type": "application/json",
        "OData-Version": "4.0",
        "Content-Length": String(Buffer.byteLength(payload)),
        ...headers,
      });
      res.end(payload);
    };
    const error = (status: number, message: string) =>
      send(status, { error: { code: "Base.1.0.GeneralError", message } });
    if (this.faults.http5xx) return error(this.faults.http5xx, "injected failure");

    const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "") || "/";
    const method = req.method ?? "GET";
    const sys = this.systemPath;

    if (method === "GET" && (path === "/redfish/v1" || path === "/redfish")) {
      if (path === "/redfish") return send(200, { v1: "/redfish/v1/" });
      return send(200, {
        "@odata.id": "/redfish/v1/",
        "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        Id: "RootService",
        Name: "fastfence lab Redfish service",
        RedfishVersion: "1.6.0",
        Systems: { "@odata.id": "/redfish/v1/Systems" },
        AccountService: { "@odata.id": "/redfish/v1/AccountService" },
        ...(this.opts.sessions === false
          ? {}
          : {
              SessionService: { "@odata.id": "/redfish/v1/SessionService" },
              Links: { Sessions: { "@odata.id": "/redfish/v1/SessionService/Sessions" } },
            }),
      });
    }

    if (method === "POST" && path === "/redfish/v1/SessionService/Sessions" && this.opts.sessions !== false) {
      let body: { UserName?: unknown; Password?: unknown } = {};
      try {
        body = JSON.parse(text || "{}");
      } catch {
        return error(400, "body is not JSON");
      }
      if (
        this.faults.authFail ||
        typeof body.UserName !== "string" ||
        typeof body.Password !== "string" ||
        !eq(body.UserName, this.opts.username) ||
        !eq(body.Password, this.password)
      ) {
        this.stats.authFailures++;
        return error(401, "invalid credentials");
      }
      const id = String(this.nextSession++);
      const token = randomBytes(16).toString("hex");
      this.sessions.set(token, id);
      const loc = `/redfish/v1/SessionService/Sessions/${id}`;
      return send(
        201,
        { "@odata.id": loc, Id: id, UserName: body.UserName },
        { "X-Auth-Token": token, Location: loc },
      );
    }

    if (!this.authorized(req)) {
      this.stats.authFailures++;
      return send(
        401,
        { error: { code: "Base.1.0.NoValidSession", message: "authentication required" } },
        {
          "WWW-Authenticate": 'Basic realm="redfish"',
        },
      );
    }

    if (method === "DELETE" && path.startsWith("/redfish/v1/SessionService/Sessions/")) {
      const id = path.split("/").pop();
      for (const [tok, sid] of this.sessions) if (sid === id) this.sessions.delete(tok);
      return send(204);
    }
    if (method === "PATCH" && path === "/redfish/v1/AccountService/Accounts/1") {
      let pw: unknown;
      try {
        pw = (JSON.parse(text || "{}") as { Password?: unknown }).Password;
      } catch {
        return error(400, "body is not JSON");
      }
      if (typeof pw !== "string" || pw === "") return error(400, "Password must be a non-empty string");
      // like OpenBMC: a changed password ends the account's sessions
      this.password = pw;
      this.sessions.clear();
      return send(204);
    }
    if (method === "GET" && path === "/redfish/v1/SessionService") {
      return send(200, {
        "@odata.id": "/redfish/v1/SessionService",
        Id: "SessionService",
        ServiceEnabled: true,
        Sessions: { "@odata.id": "/redfish/v1/SessionService/Sessions" },
      });
    }
    if (method === "GET" && path === "/redfish/v1/Systems") {
      return send(200, {
        "@odata.id": "/redfish/v1/Systems",
        "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
        Name: "Computer System Collection",
        "Members@odata.count": 1,
        Members: [{ "@odata.id": sys }],
      });
    }
    if (method === "GET" && path === sys) {
      return send(200, {
        "@odata.id": sys,
        "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem",
        Id: this.systemId,
        Name: this.systemId,
        PowerState: this.power,
        Actions: {
          "#ComputerSystem.Reset": {
            target: `${sys}/Actions/ComputerSystem.Reset`,
            "ResetType@Redfish.AllowableValues": ALLOWED,
          },
        },
      });
    }
    if (method === "POST" && path === `${sys}/Actions/ComputerSystem.Reset`) {
      let type: unknown;
      try {
        type = (JSON.parse(text || "{}") as { ResetType?: unknown }).ResetType;
      } catch {
        return error(400, "body is not JSON");
      }
      if (typeof type !== "string" || !ALLOWED.includes(type)) return error(400, `ResetType not allowed`);
      this.stats.resets.push({ type, at: Date.now() });
      await this.applyReset(type);
      return send(204);
    }
    return error(path.startsWith("/redfish/v1") ? 404 : 404, "not found");
  }

  private async applyReset(type: string): Promise<void> {
    const off = type === "ForceOff" || type === "GracefulShutdown" || type === "PowerOff";
    const on = type === "On" || type === "ForceOn";
    if (off) {
      if (this.power === "Off") return;
      if (this.faults.lie) {
        this.power = "Off";
        return;
      }
      this.power = "PoweringOff";
      if (this.faults.stuckPoweringOff) return;
      void this.runHook("off");
    } else if (on) {
      if (this.power === "On") return;
      this.power = "PoweringOn";
      void this.runHook("on");
    } else if (type === "ForceRestart" || type === "PowerCycle") {
      this.power = "PoweringOff";
      void this.runHook("off").then(() => {
        this.power = "PoweringOn";
        return this.runHook("on");
      });
    }
  }

  private async runHook(which: "off" | "on"): Promise<void> {
    try {
      if (which === "off") {
        this.stats.offHookCalls++;
        await this.opts.hooks?.powerOff?.();
        // a stuck switch flipped meanwhile keeps the state where it is
        if (this.power === "PoweringOff") this.power = "Off";
      } else {
        this.stats.onHookCalls++;
        await this.opts.hooks?.powerOn?.();
        if (this.power === "PoweringOn") this.power = "On";
      }
    } catch {
      // a failed hook leaves the transitional state: the node's power is not known to have changed
    }
  }
}
