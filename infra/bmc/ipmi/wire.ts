// IPMI over LAN framing (IPMI v2.0 spec, sections 13.6-13.8 and 22): the RMCP header, the
// IPMI v1.5 session wrapper (used only before a session, for Get Channel Authentication
// Capabilities), the RMCP+ (IPMI v2.0) session wrapper with integrity trailer and AES-CBC
// confidentiality, and the IPMI LAN message with its two checksums. Pure byte codecs:
// no sockets, no clocks, no secrets kept (keys are passed in per call).
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Raised by the codecs on malformed input; the session layer maps it to FF_BMC_PROTOCOL. */
export class IpmiWireError extends Error {}

// RMCP header (4 bytes):
//   version:u8 = 0x06 | reserved:u8 = 0x00 | sequence:u8 = 0xFF (no RMCP ack) | class:u8 = 0x07 (IPMI)
export const RMCP_HEADER = Buffer.from([0x06, 0x00, 0xff, 0x07]);

export const PayloadType = {
  IPMI: 0x00,
  OPEN_SESSION_REQUEST: 0x10,
  OPEN_SESSION_RESPONSE: 0x11,
  RAKP1: 0x12,
  RAKP2: 0x13,
  RAKP3: 0x14,
  RAKP4: 0x15,
} as const;

export interface CipherSuite {
  id: 3 | 17;
  /** RAKP authentication algorithm number and HMAC hash. */
  authAlg: number;
  hash: "sha1" | "sha256";
  /** RAKP2/3 key exchange code length (full HMAC). */
  authCodeLen: number;
  /** RAKP4 integrity check value length (truncated HMAC). */
  icvLen: number;
  integrityAlg: number;
  /** Per-packet AuthCode length (HMAC-SHA1-96 = 12, HMAC-SHA256-128 = 16). */
  integrityLen: number;
  confidentialityAlg: number;
}

export const CIPHER_SUITES: Record<3 | 17, CipherSuite> = {
  3: {
    id: 3,
    authAlg: 0x01,
    hash: "sha1",
    authCodeLen: 20,
    icvLen: 12,
    integrityAlg: 0x01,
    integrityLen: 12,
    confidentialityAlg: 0x01,
  },
  17: {
    id: 17,
    authAlg: 0x03,
    hash: "sha256",
    authCodeLen: 32,
    icvLen: 16,
    integrityAlg: 0x04,
    integrityLen: 16,
    confidentialityAlg: 0x01,
  },
};

/** Session keys derived after RAKP: K1 signs packets, the first 16 bytes of K2 encrypt them. */
export interface SessionKeys {
  suite: CipherSuite;
  k1: Buffer;
  k2: Buffer;
}

export function hmac(hash: "sha1" | "sha256", key: Buffer, ...parts: Buffer[]): Buffer {
  const h = createHmac(hash, key);
  for (const p of parts) h.update(p);
  return h.digest();
}

// IPMI LAN message (request):
//   rsAddr:u8 | netFn<<2|rsLUN:u8 | checksum1:u8 | rqAddr:u8 | rqSeq<<2|rqLUN:u8 | cmd:u8 | data:bytes | checksum2:u8
// response: rqAddr | netFn<<2|rqLUN | checksum1 | rsAddr | rqSeq<<2|rsLUN | cmd | completionCode | data | checksum2
// checksum = two's complement of the byte sum, so the covered bytes plus checksum sum to 0 (mod 256).
export const BMC_ADDR = 0x20;
export const REMOTE_SWID = 0x81;

function checksum(b: Buffer, start: number, end: number): number {
  let s = 0;
  for (let i = start; i < end; i++) s = (s + b[i]!) & 0xff;
  return (0x100 - s) & 0xff;
}

export interface IpmiRequest {
  netFn: number;
  cmd: number;
  rqSeq: number;
  data: Buffer;
}

export interface IpmiResponse {
  netFn: number;
  cmd: number;
  rqSeq: number;
  completionCode: number;
  data: Buffer;
}

export function encodeIpmiRequest(r: IpmiRequest): Buffer {
  const b = Buffer.alloc(7 + r.data.length);
  b[0] = BMC_ADDR;
  b[1] = (r.netFn << 2) & 0xff;
  b[2] = checksum(b, 0, 2);
  b[3] = REMOTE_SWID;
  b[4] = (r.rqSeq << 2) & 0xff;
  b[5] = r.cmd;
  r.data.copy(b, 6);
  b[6 + r.data.length] = checksum(b, 3, 6 + r.data.length);
  return b;
}

export function decodeIpmiResponse(b: Buffer): IpmiResponse {
  if (b.length < 8) throw new IpmiWireError(`IPMI response too short (${b.length} bytes)`);
  if (checksum(b, 0, 2) !== b[2]) throw new IpmiWireError("IPMI response header checksum mismatch");
  if (checksum(b, 3, b.length - 1) !== b[b.length - 1])
    throw new IpmiWireError("IPMI response data checksum mismatch");
  return {
    netFn: b[1]! >> 2,
    rqSeq: b[4]! >> 2,
    cmd: b[5]!,
    completionCode: b[6]!,
    data: b.subarray(7, b.length - 1),
  };
}

/** For tests and fixtures: the request a BMC would have received. */
export function decodeIpmiRequest(b: Buffer): IpmiRequest {
  if (b.length < 7) throw new IpmiWireError("IPMI request too short");
  if (checksum(b, 0, 2) !== b[2] || checksum(b, 3, b.length - 1) !== b[b.length - 1]) {
    throw new IpmiWireError("IPMI request checksum mismatch");
  }
  return { netFn: b[1]! >> 2, rqSeq: b[4]! >> 2, cmd: b[5]!, data: b.subarray(6, b.length - 1) };
}

// IPMI v1.5 session wrapper, authentication type NONE (pre-session only):
//   RMCP header | authType:u8 = 0x00 | sessionSeq:u32le = 0 | sessionId:u32le = 0 | msgLen:u8 | message
export function encodeV15(message: Buffer): Buffer {
  const h = Buffer.alloc(10);
  h[9] = message.length;
  return Buffer.concat([RMCP_HEADER, h, message]);
}

export function decodeV15(pkt: Buffer): Buffer {
  checkRmcp(pkt);
  if (pkt[4] !== 0x00) throw new IpmiWireError(`v1.5 auth type ${pkt[4]} not supported`);
  const len = pkt[13]!;
  if (pkt.length < 14 + len) throw new IpmiWireError("v1.5 message truncated");
  return pkt.subarray(14, 14 + len);
}

function checkRmcp(pkt: Buffer): void {
  if (pkt.length < 5 || pkt[0] !== 0x06 || pkt[3] !== 0x07)
    throw new IpmiWireError("not an RMCP/IPMI packet");
}

// RMCP+ session wrapper (IPMI v2.0, 13.6):
//   RMCP header
//   | authType:u8 = 0x06 (RMCP+)
//   | payloadType:u8 (bit7 encrypted, bit6 authenticated, bits5-0 type)
//   | sessionId:u32le | sessionSeq:u32le | payloadLength:u16le
//   | payload  (encrypted: IV:16 | AES-CBC-128(data | pad 0x01,0x02.. | padLen:u8))
//   [ if authenticated: integrityPad (0xFF × n, so authType..nextHeader is a multiple of 4)
//     | padLength:u8 | nextHeader:u8 = 0x07 | authCode (HMAC(K1, authType..nextHeader), truncated) ]
export interface V20Packet {
  payloadType: number;
  encrypted: boolean;
  authenticated: boolean;
  sessionId: number;
  sessionSeq: number;
  /** Plain payload (decrypted when encrypted and keys were given). */
  payload: Buffer;
}

export function encryptPayload(k2: Buffer, data: Buffer, iv: Buffer = randomBytes(16)): Buffer {
  const padLen = (16 - ((data.length + 1) % 16)) % 16;
  const pad = Buffer.alloc(padLen);
  for (let i = 0; i < padLen; i++) pad[i] = i + 1;
  const plain = Buffer.concat([data, pad, Buffer.from([padLen])]);
  const c = createCipheriv("aes-128-cbc", k2.subarray(0, 16), iv);
  c.setAutoPadding(false);
  return Buffer.concat([iv, c.update(plain), c.final()]);
}

export function decryptPayload(k2: Buffer, enc: Buffer): Buffer {
  if (enc.length < 32 || (enc.length - 16) % 16 !== 0)
    throw new IpmiWireError("encrypted payload has a bad length");
  const d = createDecipheriv("aes-128-cbc", k2.subarray(0, 16), enc.subarray(0, 16));
  d.setAutoPadding(false);
  const plain = Buffer.concat([d.update(enc.subarray(16)), d.final()]);
  const padLen = plain[plain.length - 1]!;
  if (padLen > 15 || padLen + 1 > plain.length) throw new IpmiWireError("bad confidentiality pad");
  return plain.subarray(0, plain.length - 1 - padLen);
}

export function encodeV20(
  p: { payloadType: number; sessionId: number; sessionSeq: number; payload: Buffer },
  keys?: SessionKeys,
  iv?: Buffer,
): Buffer {
  const body = keys ? encryptPayload(keys.k2, p.payload, iv) : p.payload;
  const head = Buffer.alloc(12);
  head[0] = 0x06;
  head[1] = p.payloadType | (keys ? 0xc0 : 0);
  head.writeUInt32LE(p.sessionId >>> 0, 2);
  head.writeUInt32LE(p.sessionSeq >>> 0, 6);
  head.writeUInt16LE(body.length, 10);
  if (!keys) return Buffer.concat([RMCP_HEADER, head, body]);
  const covered = head.length + body.length + 2;
  const padLen = (4 - (covered % 4)) % 4;
  const trailer = Buffer.concat([Buffer.alloc(padLen, 0xff), Buffer.from([padLen, 0x07])]);
  const signed = Buffer.concat([head, body, trailer]);
  const code = hmac(keys.suite.hash, keys.k1, signed).subarray(0, keys.suite.integrityLen);
  return Buffer.concat([RMCP_HEADER, signed, code]);
}

export function decodeV20(pkt: Buffer, keys?: SessionKeys): V20Packet {
  checkRmcp(pkt);
  if (pkt[4] !== 0x06) throw new IpmiWireError(`not an RMCP+ packet (auth type ${pkt[4]})`);
  if (pkt.length < 16) throw new IpmiWireError("RMCP+ header truncated");
  const pt = pkt[5]!;
  const encrypted = (pt & 0x80) !== 0;
  const authenticated = (pt & 0x40) !== 0;
  const payloadType = pt & 0x3f;
  if (payloadType === 0x02) throw new IpmiWireError("OEM payloads not supported");
  const sessionId = pkt.readUInt32LE(6);
  const sessionSeq = pkt.readUInt32LE(10);
  const len = pkt.readUInt16LE(14);
  if (pkt.length < 16 + len) throw new IpmiWireError("RMCP+ payload truncated");
  let payload = pkt.subarray(16, 16 + len);
  if (authenticated) {
    if (!keys) throw new IpmiWireError("authenticated packet outside a session");
    const codeLen = keys.suite.integrityLen;
    const signedEnd = pkt.length - codeLen;
    if (signedEnd < 16 + len + 2) throw new IpmiWireError("integrity trailer truncated");
    const expect = hmac(keys.suite.hash, keys.k1, pkt.subarray(4, signedEnd)).subarray(0, codeLen);
    const got = pkt.subarray(signedEnd);
    if (got.length !== expect.length || !timingSafeEqual(got, expect))
      throw new IpmiWireError("integrity check failed");
  }
  if (encrypted) {
    if (!keys) throw new IpmiWireError("encrypted packet outside a session");
    payload = decryptPayload(keys.k2, payload);
  }
  return { payloadType, encrypted, authenticated, sessionId, sessionSeq, payload };
}

/** Distinguishes v1.5 from RMCP+ packets by the auth type byte. */
export function isV20(pkt: Buffer): boolean {
  return pkt.length > 4 && pkt[4] === 0x06;
}
