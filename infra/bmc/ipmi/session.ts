// One IPMI v2.0 RMCP+ (lanplus) session over UDP: Get Channel Authentication
// Capabilities, Open Session, RAKP 1-4 (HMAC-SHA1 for cipher suite 3, HMAC-SHA256 for 17),
// Set Session Privilege Level, then authenticated (HMAC-SHA1-96 / HMAC-SHA256-128) and
// AES-CBC-128-encrypted IPMI requests, each retransmitted with exponential backoff until
// answered or the caller's deadline ends; Close Session at the end. The password lives
// only in this object's Kuid buffer; it never reaches an error, a log or a packet capture
// hook (the capture sees what is on the wire, where the password never is).
import { randomBytes, randomInt } from "node:crypto";
import dgram from "node:dgram";
import * as chassisStatusMsg from "./messages/getChassisStatus/index.ts";
import * as closeSessionMsg from "./messages/closeSession/index.ts";
import * as gcacMsg from "./messages/getChannelAuthCapabilities/index.ts";
import * as openSessionMsg from "./messages/openSession/index.ts";
import * as rakp from "./messages/rakp/index.ts";
import * as privMsg from "./messages/setSessionPrivilege/index.ts";
import {
  CIPHER_SUITES,
  decodeIpmiResponse,
  decodeV15,
  decodeV20,
  encodeIpmiRequest,
  encodeV15,
  encodeV20,
  isV20,
  PayloadType,
  type CipherSuite,
  type IpmiResponse,
  type SessionKeys,
} from "./wire.ts";

export type IpmiFailureKind = "auth" | "no-reply" | "unsupported" | "protocol" | "aborted" | "unreachable";

/** Internal failure; the driver maps `kind` to the typed BMC errors. */
export class IpmiSessionError extends Error {
  readonly kind: IpmiFailureKind;
  constructor(kind: IpmiFailureKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

export interface IpmiSessionOptions {
  host: string;
  port: number;
  username: string;
  password: string;
  cipherSuite?: 3 | 17;
  /** 3 operator, 4 admin (default). */
  privilege?: number;
  /** First retransmit after this many ms, doubling up to maxRetryMs. */
  firstRetryMs?: number;
  maxRetryMs?: number;
  /** Sees every datagram (for recorded fixtures and debugging). */
  onPacket?: (dir: "tx" | "rx", pkt: Buffer) => void;
  /** Fixed randomness, for recording reproducible fixtures only. */
  random?: (n: number) => Buffer;
}

export class IpmiSession {
  private readonly opts: IpmiSessionOptions;
  private readonly suite: CipherSuite;
  private readonly key: Buffer;
  private readonly user: Buffer;
  private readonly socket: dgram.Socket;
  private waiter: ((pkt: Buffer) => void) | undefined;
  private socketError: NodeJS.ErrnoException | undefined;
  private keys: SessionKeys | undefined;
  private consoleSessionId = 0;
  private managedSessionId = 0;
  private seq = 1;
  private rqSeq = 1;
  private tag = 0;
  private closed = false;

  constructor(opts: IpmiSessionOptions) {
    this.opts = opts;
    this.suite = CIPHER_SUITES[opts.cipherSuite ?? 3];
    this.key = rakp.kuid(opts.password);
    this.user = Buffer.from(opts.username, "utf8");
    this.socket = dgram.createSocket(opts.host.includes(":") ? "udp6" : "udp4");
    this.socket.on("message", (pkt) => {
      this.opts.onPacket?.("rx", pkt);
      this.waiter?.(pkt);
    });
    this.socket.on("error", (err: NodeJS.ErrnoException) => {
      this.socketError = err;
    });
    this.socket.unref();
  }

  get active(): boolean {
    return this.keys !== undefined && !this.closed;
  }

  private rand(n: number): Buffer {
    return this.opts.random ? this.opts.random(n) : randomBytes(n);
  }

  /** Sends `build(attempt)` until `match` accepts a reply; retransmits with backoff. */
  private exchange<T>(
    build: (attempt: number) => Buffer,
    match: (pkt: Buffer) => T | undefined,
    signal: AbortSignal,
  ): Promise<T> {
    if (this.closed) return Promise.reject(new IpmiSessionError("protocol", "session closed"));
    return new Promise<T>((resolve, reject) => {
      let attempt = 0;
      let timer: NodeJS.Timeout | undefined;
      let delay = this.opts.firstRetryMs ?? 200;
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        this.waiter = undefined;
        signal.removeEventListener("abort", onAbort);
        fn();
      };
      const onAbort = () => finish(() => reject(new IpmiSessionError("aborted", "aborted")));
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiter = (pkt) => {
        let r: T | undefined;
        try {
          r = match(pkt);
        } catch (err) {
          if (err instanceof IpmiSessionError) return finish(() => reject(err));
          return; // a malformed or foreign datagram: keep waiting
        }
        if (r !== undefined) finish(() => resolve(r as T));
      };
      const send = () => {
        if (this.socketError?.code === "ECONNREFUSED") {
          return finish(() => reject(new IpmiSessionError("unreachable", "port unreachable")));
        }
        const pkt = build(attempt++);
        this.opts.onPacket?.("tx", pkt);
        this.socket.send(pkt, this.opts.port, this.opts.host, (err) => {
          if (err) this.socketError = err as NodeJS.ErrnoException;
        });
        timer = setTimeout(send, delay);
        delay = Math.min(delay * 2, this.opts.maxRetryMs ?? 1000);
      };
      send();
    });
  }

  /** The full RMCP+ handshake; leaves the session active at the configured privilege. */
  async open(signal: AbortSignal): Promise<void> {
    const priv = this.opts.privilege ?? 4;
    // 1. Get Channel Authentication Capabilities (v1.5 wrapper, no session)
    const gcacSeq = this.nextRqSeq();
    const caps = await this.exchange(
      () =>
        encodeV15(
          encodeIpmiRequest({
            netFn: gcacMsg.NETFN,
            cmd: gcacMsg.CMD,
            rqSeq: gcacSeq,
            data: gcacMsg.encode(priv),
          }),
        ),
      (pkt) => {
        if (isV20(pkt)) return undefined;
        const r = decodeIpmiResponse(decodeV15(pkt));
        if (r.cmd !== gcacMsg.CMD || r.rqSeq !== gcacSeq) return undefined;
        if (r.completionCode !== 0)
          throw new IpmiSessionError(
            "protocol",
            `Get Channel Auth Capabilities cc 0x${r.completionCode.toString(16)}`,
          );
        return gcacMsg.decode(r.data);
      },
      signal,
    );
    if (!caps.supportsRmcpPlus)
      throw new IpmiSessionError("unsupported", "BMC channel does not support IPMI v2.0/RMCP+");

    // 2. Open Session
    this.consoleSessionId = randomInt(1, 0x7fffffff) >>> 0 || 1;
    const osTag = this.nextTag();
    const os = await this.exchange(
      () =>
        encodeV20({
          payloadType: PayloadType.OPEN_SESSION_REQUEST,
          sessionId: 0,
          sessionSeq: 0,
          payload: openSessionMsg.encode({
            tag: osTag,
            privilege: priv,
            consoleSessionId: this.consoleSessionId,
            suite: this.suite,
          }),
        }),
      (pkt) => {
        const p = this.preSession(pkt, PayloadType.OPEN_SESSION_RESPONSE);
        if (!p) return undefined;
        const r = openSessionMsg.decode(p);
        if (r.tag !== osTag || r.consoleSessionId !== this.consoleSessionId) return undefined;
        return r;
      },
      signal,
    );
    if (os.status !== 0) {
      const kind = rakp.AUTH_STATUSES.has(os.status) ? "auth" : "unsupported";
      throw new IpmiSessionError(
        kind,
        `Open Session refused: ${rakp.STATUS_TEXT[os.status] ?? `status 0x${os.status.toString(16)}`}`,
      );
    }
    if (
      os.authAlg !== this.suite.authAlg ||
      os.integrityAlg !== this.suite.integrityAlg ||
      os.confidentialityAlg !== this.suite.confidentialityAlg
    ) {
      throw new IpmiSessionError("unsupported", `BMC did not accept cipher suite ${this.suite.id}`);
    }
    this.managedSessionId = os.managedSessionId;

    // 3. RAKP 1 / 2
    const rm = this.rand(16);
    const role = 0x10 | priv; // name-only lookup
    const r1Tag = this.nextTag();
    const r2 = await this.exchange(
      () =>
        encodeV20({
          payloadType: PayloadType.RAKP1,
          sessionId: 0,
          sessionSeq: 0,
          payload: rakp.encodeRakp1({
            tag: r1Tag,
            managedSessionId: this.managedSessionId,
            rm,
            role,
            username: this.user,
          }),
        }),
      (pkt) => {
        const p = this.preSession(pkt, PayloadType.RAKP2);
        if (!p) return undefined;
        const r = rakp.decodeRakp2(p);
        return r.tag === r1Tag ? r : undefined;
      },
      signal,
    );
    if (r2.status !== 0) {
      const kind = rakp.AUTH_STATUSES.has(r2.status) ? "auth" : "protocol";
      throw new IpmiSessionError(
        kind,
        `RAKP2: ${rakp.STATUS_TEXT[r2.status] ?? `status 0x${r2.status.toString(16)}`}`,
      );
    }
    const h: rakp.Handshake = {
      consoleSessionId: this.consoleSessionId,
      managedSessionId: this.managedSessionId,
      rm,
      rc: r2.rc,
      guid: r2.guid,
      role,
      username: this.user,
    };
    if (!rakp.verifyRakp2(this.suite, this.key, h, r2.authCode)) {
      throw new IpmiSessionError("auth", "RAKP2 key exchange code mismatch (wrong password)");
    }

    // 4. RAKP 3 / 4
    const r3Tag = this.nextTag();
    const sikKey = rakp.sik(this.suite, this.key, h);
    const r4 = await this.exchange(
      () =>
        encodeV20({
          payloadType: PayloadType.RAKP3,
          sessionId: 0,
          sessionSeq: 0,
          payload: rakp.encodeRakp3({
            tag: r3Tag,
            status: 0,
            managedSessionId: this.managedSessionId,
            authCode: rakp.rakp3AuthCode(this.suite, this.key, h),
          }),
        }),
      (pkt) => {
        const p = this.preSession(pkt, PayloadType.RAKP4);
        if (!p) return undefined;
        const r = rakp.decodeRakp4(p);
        return r.tag === r3Tag ? r : undefined;
      },
      signal,
    );
    if (r4.status !== 0) {
      const kind = rakp.AUTH_STATUSES.has(r4.status) ? "auth" : "protocol";
      throw new IpmiSessionError(
        kind,
        `RAKP4: ${rakp.STATUS_TEXT[r4.status] ?? `status 0x${r4.status.toString(16)}`}`,
      );
    }
    if (!rakp.verifyRakp4(this.suite, sikKey, h, r4.icv))
      throw new IpmiSessionError("auth", "RAKP4 integrity check value mismatch");
    this.keys = rakp.sessionKeys(this.suite, sikKey);
    this.seq = 1;

    // 5. Raise the session to the configured privilege (sessions start at User).
    const pr = await this.command(privMsg.NETFN, privMsg.CMD, privMsg.encode(priv), signal);
    if (pr.completionCode !== 0) {
      throw new IpmiSessionError(
        "auth",
        `Set Session Privilege Level refused (cc 0x${pr.completionCode.toString(16)})`,
      );
    }
  }

  private preSession(pkt: Buffer, want: number): Buffer | undefined {
    if (!isV20(pkt)) return undefined;
    const p = decodeV20(pkt);
    if (p.payloadType !== want) return undefined;
    return p.payload;
  }

  private nextTag(): number {
    this.tag = (this.tag + 1) & 0xff;
    return this.tag;
  }

  private nextRqSeq(): number {
    this.rqSeq = (this.rqSeq + 1) & 0x3f;
    return this.rqSeq;
  }

  /** One authenticated, encrypted IPMI request; resolves with the response (any completion code). */
  command(netFn: number, cmd: number, data: Buffer, signal: AbortSignal): Promise<IpmiResponse> {
    const keys = this.keys;
    if (!keys) return Promise.reject(new IpmiSessionError("protocol", "session not active"));
    const rqSeq = this.nextRqSeq();
    const message = encodeIpmiRequest({ netFn, cmd, rqSeq, data });
    return this.exchange(
      () => {
        const s = this.seq;
        this.seq = (this.seq + 1) >>> 0 || 1;
        return encodeV20(
          {
            payloadType: PayloadType.IPMI,
            sessionId: this.managedSessionId,
            sessionSeq: s,
            payload: message,
          },
          keys,
        );
      },
      (pkt) => {
        if (!isV20(pkt)) return undefined;
        const p = decodeV20(pkt, keys);
        if (p.payloadType !== PayloadType.IPMI || p.sessionId !== this.consoleSessionId) return undefined;
        if (!p.authenticated || !p.encrypted)
          throw new IpmiSessionError("protocol", "BMC answered without integrity/confidentiality");
        const r = decodeIpmiResponse(p.payload);
        if (r.rqSeq !== rqSeq || r.cmd !== cmd || r.netFn !== netFn + 1) return undefined;
        return r;
      },
      signal,
    );
  }

  async chassisStatus(
    signal: AbortSignal,
  ): Promise<chassisStatusMsg.ChassisStatus & { completionCode: number }> {
    const r = await this.command(
      chassisStatusMsg.NETFN,
      chassisStatusMsg.CMD,
      chassisStatusMsg.encode(),
      signal,
    );
    if (r.completionCode !== 0)
      return {
        powerOn: false,
        powerControlFault: false,
        mainPowerFault: false,
        raw: -1,
        completionCode: r.completionCode,
      };
    return { ...chassisStatusMsg.decode(r.data), completionCode: 0 };
  }

  /** Close Session (best effort, bounded), then the socket. */
  async close(timeoutMs = 500): Promise<void> {
    if (this.closed) return;
    if (this.keys) {
      try {
        await this.command(
          closeSessionMsg.NETFN,
          closeSessionMsg.CMD,
          closeSessionMsg.encode(this.managedSessionId),
          AbortSignal.timeout(timeoutMs),
        );
      } catch {
        // best effort: the BMC times idle sessions out anyway
      }
    }
    this.closed = true;
    this.keys = undefined;
    this.key.fill(0);
    try {
      this.socket.close();
    } catch {
      // already closed
    }
  }
}
