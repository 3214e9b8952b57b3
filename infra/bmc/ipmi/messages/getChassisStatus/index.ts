// Get Chassis Status (IPMI v2.0 28.2), NetFn Chassis (0x00), cmd 0x01. Pure codec.
//
// request data:  (none)
// response data: currentPowerState:u8 (bit0 = system power is on, bit1 overload, bit2 interlock,
//                  bit3 main power fault, bit4 power control fault, bits6-5 restore policy)
//              | lastPowerEvent:u8 | miscChassisState:u8 | [frontPanelButtons:u8]
export const NETFN = 0x00;
export const CMD = 0x01;

export function encode(): Buffer {
  return Buffer.alloc(0);
}

export interface ChassisStatus {
  powerOn: boolean;
  powerControlFault: boolean;
  mainPowerFault: boolean;
  raw: number;
}

export function decode(data: Buffer): ChassisStatus {
  if (data.length < 3) throw new Error(`Get Chassis Status response too short (${data.length})`);
  const b = data[0]!;
  return {
    powerOn: (b & 0x01) !== 0,
    mainPowerFault: (b & 0x08) !== 0,
    powerControlFault: (b & 0x10) !== 0,
    raw: b,
  };
}
