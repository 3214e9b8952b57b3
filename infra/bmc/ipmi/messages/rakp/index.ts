// RAKP Messages 1-4 (IPMI v2.0 13.20-13.23), payload types 0x12-0x15, and the key
// exchange codes of 13.31-13.32. Pure codec and pure crypto: keys and randoms are passed
// in, nothing is kept.
//
// RAKP1: messageTag:u8 | reserved:u24 | managedSessionId:u32le | consoleRandom(Rm):16
//      | role:u8 (bits3-0 privilege, bit4 = name-only lookup) | reserved:u16 | nameLength:u8 | name:0-16
// RAKP2: messageTag:u8 | status:u8 | reserved:u16 | consoleSessionId:u32le | managedRandom(Rc):16
//      | managedGuid(GUIDc):16 | keyExchangeAuthCode:HMAC_Kuid(SIDm|SIDc|Rm|Rc|GUIDc|ROLEm|ULENm|UNAMEm)
// RAKP3: messageTag:u8 | status:u8 | reserved:u16 | managedSessionId:u32le
//      | keyExchangeAuthCode:HMAC_Kuid(Rc|SIDm|ROLEm|ULENm|UNAMEm)
// RAKP4: messageTag:u8 | status:u8 | reserved:u16 | consoleSessionId:u32le
//      | integrityCheckValue: HMAC_SIK(Rm|SIDc|GUIDc) truncated to icvLen
// SIK = HMAC_Kg(Rm|Rc|ROLEm|ULENm|UNAMEm), Kg = Kuid when the BMC has no BMC key;
// K1 = HMAC_SIK(0x01 × 20), K2 = HMAC_SIK(0x02 × 20). Kuid = password, zero-padded to 20 bytes.
import { timingSafeEqual } from "node:crypto";
import { hmac, type CipherSuite, type SessionKeys } from "../../wire.ts";

export const STATUS_TEXT: Record<number, string> = {
  0x00: "no errors",
  0x01: "insufficient resources to create a session",
  0x02: "invalid session ID",
  0x03: "invalid payload type",
  0x04: "invalid authentication algorithm",
  0x05: "invalid integrity algorithm",
  0x06: "no matching authentication payload",
  0x07: "no matching integrity payload",
  0x08: "inactive session ID",
  0x09: "invalid role",
  0x0a: "unauthorized role or privilege level requested",
  0x0b: "insufficient resources to create a session at the requested role",
  0x0c: "invalid name length",
  0x0d: "unauthorized name",
  0x0e: "unauthorized GUID",
  0x0f: "invalid integrity check value",
  0x10: "invalid confidentiality algorithm",
  0x11: "no cipher suite match with proposed security algorithms",
  0x12: "illegal or unrecognized parameter",
};

/** Status codes that mean "these credentials are not accepted". */
export const AUTH_STATUSES = new Set([0x0a, 0x0d, 0x0f, 0x0e, 0x09]);

export interface Handshake {
  consoleSessionId: number;
  managedSessionId: number;
  rm: Buffer;
  rc: Buffer;
  guid: Buffer;
  /** The role byte exactly as sent in RAKP1. */
  role: number;
  username: Buffer;
}

export function kuid(password: string): Buffer {
  const pw = Buffer.from(password, "utf8");
  if (pw.length > 20) throw new Error("IPMI passwords are at most 20 bytes");
  const k = Buffer.alloc(20);
  pw.copy(k);
  return k;
}

export function encodeRakp1(p: {
  tag: number;
  managedSessionId: number;
  rm: Buffer;
  role: number;
  username: Buffer;
}): Buffer {
  if (p.username.length > 16) throw new Error("IPMI user names are at most 16 bytes");
  const b = Buffer.alloc(28 + p.username.length);
  b[0] = p.tag;
  b.writeUInt32LE(p.managedSessionId >>> 0, 4);
  p.rm.copy(b, 8);
  b[24] = p.role;
  b[27] = p.username.length;
  p.username.copy(b, 28);
  return b;
}

export interface Rakp2 {
  tag: number;
  status: number;
  consoleSessionId: number;
  rc: Buffer;
  guid: Buffer;
  authCode: Buffer;
}

export function decodeRakp2(b: Buffer): Rakp2 {
  if (b.length < 8) throw new Error(`RAKP2 too short (${b.length})`);
  const status = b[1]!;
  if (status !== 0)
    return {
      tag: b[0]!,
      status,
      consoleSessionId: b.readUInt32LE(4),
      rc: Buffer.alloc(0),
      guid: Buffer.alloc(0),
      authCode: Buffer.alloc(0),
    };
  if (b.length < 40) throw new Error(`RAKP2 too short (${b.length})`);
  return {
    tag: b[0]!,
    status,
    consoleSessionId: b.readUInt32LE(4),
    rc: Buffer.from(b.subarray(8, 24)),
    guid: Buffer.from(b.subarray(24, 40)),
    authCode: Buffer.from(b.subarray(40)),
  };
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}

function roleNameTail(h: Handshake): Buffer[] {
  return [Buffer.from([h.role, h.username.length]), h.username];
}

export function rakp2AuthCode(suite: CipherSuite, key: Buffer, h: Handshake): Buffer {
  return hmac(
    suite.hash,
    key,
    u32(h.consoleSessionId),
    u32(h.managedSessionId),
    h.rm,
    h.rc,
    h.guid,
    ...roleNameTail(h),
  );
}

export function verifyRakp2(suite: CipherSuite, key: Buffer, h: Handshake, got: Buffer): boolean {
  const want = rakp2AuthCode(suite, key, h);
  return got.length === want.length && timingSafeEqual(got, want);
}

export function encodeRakp3(p: {
  tag: number;
  status: number;
  managedSessionId: number;
  authCode: Buffer;
}): Buffer {
  const b = Buffer.alloc(8 + p.authCode.length);
  b[0] = p.tag;
  b[1] = p.status;
  b.writeUInt32LE(p.managedSessionId >>> 0, 4);
  p.authCode.copy(b, 8);
  return b;
}

export function rakp3AuthCode(suite: CipherSuite, key: Buffer, h: Handshake): Buffer {
  return hmac(suite.hash, key, h.rc, u32(h.consoleSessionId), ...roleNameTail(h));
}

export function sik(suite: CipherSuite, kg: Buffer, h: Handshake): Buffer {
  return hmac(suite.hash, kg, h.rm, h.rc, ...roleNameTail(h));
}

export function sessionKeys(suite: CipherSuite, sikKey: Buffer): SessionKeys {
  const len = suite.hash === "sha1" ? 20 : 32;
  return {
    suite,
    k1: hmac(suite.hash, sikKey, Buffer.alloc(len, 0x01)),
    k2: hmac(suite.hash, sikKey, Buffer.alloc(len, 0x02)),
  };
}

export interface Rakp4 {
  tag: number;
  status: number;
  consoleSessionId: number;
  icv: Buffer;
}

export function decodeRakp4(b: Buffer): Rakp4 {
  if (b.length < 8) throw new Error(`RAKP4 too short (${b.length})`);
  return { tag: b[0]!, status: b[1]!, consoleSessionId: b.readUInt32LE(4), icv: Buffer.from(b.subarray(8)) };
}

export function rakp4Icv(suite: CipherSuite, sikKey: Buffer, h: Handshake): Buffer {
  return hmac(suite.hash, sikKey, h.rm, u32(h.managedSessionId), h.guid).subarray(0, suite.icvLen);
}

export function verifyRakp4(suite: CipherSuite, sikKey: Buffer, h: Handshake, got: Buffer): boolean {
  const want = rakp4Icv(suite, sikKey, h);
  return got.length === want.length && timingSafeEqual(got, want);
}
