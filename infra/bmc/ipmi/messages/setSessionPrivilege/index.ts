// Set Session Privilege Level (IPMI v2.0 22.18), NetFn App (0x06), cmd 0x3B. A new RMCP+
// session starts at User level; chassis control needs Operator or Admin. Pure codec.
//
// request data:  privilege:u8 (bits3-0: 0 = no change, 2 user, 3 operator, 4 admin)
// response data: newPrivilege:u8
export const NETFN = 0x06;
export const CMD = 0x3b;

export function encode(privilege: number): Buffer {
  return Buffer.from([privilege & 0x0f]);
}

export function decode(data: Buffer): { privilege: number } {
  if (data.length < 1) throw new Error("Set Session Privilege Level response too short");
  return { privilege: data[0]! & 0x0f };
}
