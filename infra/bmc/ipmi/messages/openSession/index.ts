// RMCP+ Open Session Request / Response (IPMI v2.0 13.17, 13.18), payload types 0x10 / 0x11.
// Proposes exactly one cipher suite's algorithms. Pure codec.
//
// request:  messageTag:u8 | maxPrivilege:u8 (0 = highest the algorithms allow) | reserved:u16
//         | remoteConsoleSessionId:u32le
//         | authPayload:      type:u8 = 0x00 | reserved:u16 | length:u8 = 8 | algorithm:u8 | reserved:u24
//         | integrityPayload: type:u8 = 0x01 | reserved:u16 | length:u8 = 8 | algorithm:u8 | reserved:u24
//         | confPayload:      type:u8 = 0x02 | reserved:u16 | length:u8 = 8 | algorithm:u8 | reserved:u24
// response: messageTag:u8 | statusCode:u8 | maxPrivilege:u8 | reserved:u8
//         | remoteConsoleSessionId:u32le | managedSystemSessionId:u32le
//         | authPayload | integrityPayload | confPayload   (same 8-byte shapes as the request)
import type { CipherSuite } from "../../wire.ts";

export function encode(p: {
  tag: number;
  privilege: number;
  consoleSessionId: number;
  suite: CipherSuite;
}): Buffer {
  const b = Buffer.alloc(32);
  b[0] = p.tag;
  b[1] = p.privilege;
  b.writeUInt32LE(p.consoleSessionId >>> 0, 4);
  const algs = [p.suite.authAlg, p.suite.integrityAlg, p.suite.confidentialityAlg];
  for (let i = 0; i < 3; i++) {
    const o = 8 + i * 8;
    b[o] = i;
    b[o + 3] = 8;
    b[o + 4] = algs[i]!;
  }
  return b;
}

export interface OpenSessionResponse {
  tag: number;
  status: number;
  privilege: number;
  consoleSessionId: number;
  managedSessionId: number;
  authAlg: number;
  integrityAlg: number;
  confidentialityAlg: number;
}

export function decode(b: Buffer): OpenSessionResponse {
  if (b.length < 8) throw new Error(`Open Session Response too short (${b.length})`);
  const r: OpenSessionResponse = {
    tag: b[0]!,
    status: b[1]!,
    privilege: b[2]!,
    consoleSessionId: b.readUInt32LE(4),
    managedSessionId: 0,
    authAlg: -1,
    integrityAlg: -1,
    confidentialityAlg: -1,
  };
  if (r.status !== 0) return r;
  if (b.length < 36) throw new Error(`Open Session Response too short (${b.length})`);
  r.managedSessionId = b.readUInt32LE(8);
  r.authAlg = b[16]! & 0x3f;
  r.integrityAlg = b[24]! & 0x3f;
  r.confidentialityAlg = b[32]! & 0x3f;
  return r;
}
