// Get Channel Authentication Capabilities (IPMI v2.0 22.13), NetFn App (0x06), cmd 0x38.
// Sent before a session in a v1.5 wrapper; tells whether the channel speaks IPMI v2.0.
// Pure codec.
//
// request data:  channel:u8 (bit7 = 1: ask for v2.0 extended data; bits3-0 = 0x0E: this channel)
//              | maxPrivilege:u8 (bits3-0: 1 callback, 2 user, 3 operator, 4 admin)
// response data: channel:u8 | authTypeSupport:u8 (bit7 = v2.0 extended capabilities)
//              | authStatus:u8 | extCapabilities:u8 (bit1 = IPMI v2.0 / RMCP+ supported)
//              | oemId:u24 | oemAux:u8
export const NETFN = 0x06;
export const CMD = 0x38;

export function encode(privilege: number): Buffer {
  return Buffer.from([0x8e, privilege & 0x0f]);
}

export interface ChannelAuthCapabilities {
  channel: number;
  v20Extended: boolean;
  supportsRmcpPlus: boolean;
  anonymousLogin: boolean;
}

export function decode(data: Buffer): ChannelAuthCapabilities {
  if (data.length < 8) throw new Error(`Get Channel Auth Capabilities response too short (${data.length})`);
  return {
    channel: data[0]!,
    v20Extended: (data[1]! & 0x80) !== 0,
    supportsRmcpPlus: (data[3]! & 0x02) !== 0,
    anonymousLogin: (data[2]! & 0x04) !== 0,
  };
}
