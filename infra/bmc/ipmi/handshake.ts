// The RMCP+ session establishment (IPMI v2.0, section 13.15-13.31), steps 1-4 of opening a
// session: Get Channel Authentication Capabilities (v1.5 wrapper, no session), Open
// Session (cipher suite 3 or 17), RAKP 1/2 (the BMC proves it knows the password) and
// RAKP 3/4 (we prove it, both derive the session keys). Returns the session ids and keys;
// raising the privilege and every later request are session.ts. The password is only the
// Kuid buffer passed in; it is never sent, logged or put into an error.
import { randomInt } from "node:crypto";
import * as gcacMsg from "./messages/getChannelAuthCapabilities/index.ts";
import * as openSessionMsg from "./messages/openSession/index.ts";
import * as rakp from "./messages/rakp/index.ts";
import { IpmiSessionError, type IpmiTransport } from "./transport.ts";
import {
  decodeIpmiResponse,
  decodeV15,
  decodeV20,
  encodeIpmiRequest,
  encodeV15,
  encodeV20,
  isV20,
  PayloadType,
  type CipherSuite,
  type SessionKeys,
} from "./wire.ts";

/** What the handshake needs from the session that runs it. */
export interface HandshakeContext {
  transport: IpmiTransport;
  suite: CipherSuite;
  /** Kuid: the password as the RAKP HMAC key. */
  key: Buffer;
  username: Buffer;
  /** Requested maximum privilege (3 operator, 4 admin). */
  privilege: number;
  rand: (n: number) => Buffer;
  /** The session's message tag and IPMI request sequence counters. */
  nextTag: () => number;
  nextRqSeq: () => number;
}

export interface EstablishedSession {
  consoleSessionId: number;
  managedSessionId: number;
  keys: SessionKeys;
}

/** The payload of a pre-session RMCP+ packet of type `want`, else undefined (not ours). */
function preSession(pkt: Buffer, want: number): Buffer | undefined {
  if (!isV20(pkt)) return undefined;
  const p = decodeV20(pkt);
  if (p.payloadType !== want) return undefined;
  return p.payload;
}

/** Steps 1-4 of the RMCP+ handshake; throws IpmiSessionError (auth, unsupported, ...). */
export async function establishSession(
  ctx: HandshakeContext,
  signal: AbortSignal,
): Promise<EstablishedSession> {
  const { transport, suite, key, privilege: priv } = ctx;
  // 1. Get Channel Authentication Capabilities (v1.5 wrapper, no session)
  const gcacSeq = ctx.nextRqSeq();
  const caps = await transport.exchange(
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
  const consoleSessionId = randomInt(1, 0x7fffffff) >>> 0 || 1;
  const osTag = ctx.nextTag();
  const os = await transport.exchange(
    () =>
      encodeV20({
        payloadType: PayloadType.OPEN_SESSION_REQUEST,
        sessionId: 0,
        sessionSeq: 0,
        payload: openSessionMsg.encode({
          tag: osTag,
          privilege: priv,
          consoleSessionId,
          suite,
        }),
      }),
    (pkt) => {
      const p = preSession(pkt, PayloadType.OPEN_SESSION_RESPONSE);
      if (!p) return undefined;
      const r = openSessionMsg.decode(p);
      if (r.tag !== osTag || r.consoleSessionId !== consoleSessionId) return undefined;
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
    os.authAlg !== suite.authAlg ||
    os.integrityAlg !== suite.integrityAlg ||
    os.confidentialityAlg !== suite.confidentialityAlg
  ) {
    throw new IpmiSessionError("unsupported", `BMC did not accept cipher suite ${suite.id}`);
  }
  const managedSessionId = os.managedSessionId;

  // 3. RAKP 1 / 2
  const rm = ctx.rand(16);
  const role = 0x10 | priv; // name-only lookup
  const r1Tag = ctx.nextTag();
  const r2 = await transport.exchange(
    () =>
      encodeV20({
        payloadType: PayloadType.RAKP1,
        sessionId: 0,
        sessionSeq: 0,
        payload: rakp.encodeRakp1({
          tag: r1Tag,
          managedSessionId,
          rm,
          role,
          username: ctx.username,
        }),
      }),
    (pkt) => {
      const p = preSession(pkt, PayloadType.RAKP2);
      if (!p) return undefined;
      const r = rakp.decodeRakp2(p);
      return r.tag === r1Tag ? r : undefined;
    },
    signal,
  );
  throwOnRakpStatus("RAKP2", r2.status);
  const h: rakp.Handshake = {
    consoleSessionId,
    managedSessionId,
    rm,
    rc: r2.rc,
    guid: r2.guid,
    role,
    username: ctx.username,
  };
  if (!rakp.verifyRakp2(suite, key, h, r2.authCode)) {
    throw new IpmiSessionError("auth", "RAKP2 key exchange code mismatch (wrong password)");
  }

  // 4. RAKP 3 / 4
  const r3Tag = ctx.nextTag();
  const sikKey = rakp.sik(suite, key, h);
  const r4 = await transport.exchange(
    () =>
      encodeV20({
        payloadType: PayloadType.RAKP3,
        sessionId: 0,
        sessionSeq: 0,
        payload: rakp.encodeRakp3({
          tag: r3Tag,
          status: 0,
          managedSessionId,
          authCode: rakp.rakp3AuthCode(suite, key, h),
        }),
      }),
    (pkt) => {
      const p = preSession(pkt, PayloadType.RAKP4);
      if (!p) return undefined;
      const r = rakp.decodeRakp4(p);
      return r.tag === r3Tag ? r : undefined;
    },
    signal,
  );
  throwOnRakpStatus("RAKP4", r4.status);
  if (!rakp.verifyRakp4(suite, sikKey, h, r4.icv))
    throw new IpmiSessionError("auth", "RAKP4 integrity check value mismatch");
  return { consoleSessionId, managedSessionId, keys: rakp.sessionKeys(suite, sikKey) };
}

/** A RAKP message with a non-zero status code ends the handshake: auth or protocol failure. */
function throwOnRakpStatus(step: "RAKP2" | "RAKP4", status: number): void {
  if (status === 0) return;
  const kind = rakp.AUTH_STATUSES.has(status) ? "auth" : "protocol";
  throw new IpmiSessionError(
    kind,
    `${step}: ${rakp.STATUS_TEXT[status] ?? `status 0x${status.toString(16)}`}`,
  );
}
