// Close Session (IPMI v2.0 22.19), NetFn App (0x06), cmd 0x3C. Pure codec.
//
// request data:  sessionId:u32le (the managed system's session id)
// response data: (none)
export const NETFN = 0x06;
export const CMD = 0x3c;

export function encode(managedSessionId: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(managedSessionId >>> 0);
  return b;
}
