// One IPMI v2.0 RMCP+ (lanplus) session over UDP: the handshake (handshake.ts: Get Channel
// Authentication Capabilities, Open Session, RAKP 1-4 with HMAC-SHA1 for cipher suite 3,
// HMAC-SHA256 for 17), then Set Session Privilege Level, then authenticated
// (HMAC-SHA1-96 / HMAC-SHA256-128) and AES-CBC-128-encrypted IPMI requests, each sent
// through the transport (transport.ts: retransmitted with exponential backoff until
// answered or the caller's deadline ends); Close Session at the end. The password lives
// only in this object's Kuid buffer; it never reaches an error, a log or a packet capture
// hook (the capture sees what is on the wire, where the password never is).
import { randomBytes } from "node:crypto";
import * as chassisStatusMsg from "./messages/getChassisStatus/index.ts";
import * as closeSessionMsg from "./messages/closeSession/index.ts";
import * as rakp from "./messages/rakp/index.ts";
import * as privMsg from "./messages/setSessionPrivilege/index.ts";
import { establishSession } from "./handshake.ts";
import { IpmiSessionError, IpmiTransport } from "./transport.ts";
import {
  CIPHER_SUITES,
  decodeIpmiResponse,
  decodeV20,
  encodeIpmiRequest,
  encodeV20,
  isV20,
  PayloadType,
  type CipherSuite,
  type IpmiResponse,
  type SessionKeys,
} from "./wire.ts";

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
  /** See IpmiTransportOptions.noReplyMs. */
  noReplyMs?: number;
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
  private readonly transport: IpmiTransport;
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
    this.transport = new IpmiTransport({
      host: opts.host,
      port: opts.port,
      firstRetryMs: opts.firstRetryMs,
      maxRetryMs: opts.maxRetryMs,
      noReplyMs: opts.noReplyMs,
      onPacket: opts.onPacket,
    });
  }

  get active(): boolean {
    return this.keys !== undefined && !this.closed;
  }

  private rand(n: number): Buffer {
    return this.opts.random ? this.opts.random(n) : randomBytes(n);
  }

  /** The full RMCP+ handshake; leaves the session active at the configured privilege. */
  async open(signal: AbortSignal): Promise<void> {
    const priv = this.opts.privilege ?? 4;
    // 1-4. Capabilities, Open Session, RAKP 1-4: session ids and keys.
    const s = await establishSession(
      {
        transport: this.transport,
        suite: this.suite,
        key: this.key,
        username: this.user,
        privilege: priv,
        rand: (n) => this.rand(n),
        nextTag: () => this.nextTag(),
        nextRqSeq: () => this.nextRqSeq(),
      },
      signal,
    );
    this.consoleSessionId = s.consoleSessionId;
    this.managedSessionId = s.managedSessionId;
    this.keys = s.keys;
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
    return this.transport.exchange(
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
    this.transport.close();
  }
}
