// Chassis Control (IPMI v2.0 28.3), NetFn Chassis (0x00), cmd 0x02. Pure codec.
// Success means the BMC accepted the command, not that power changed (S1: read back).
//
// request data:  control:u8 (0 power down, 1 power up, 2 power cycle, 3 hard reset,
//                            4 diagnostic interrupt, 5 soft shutdown via ACPI)
// response data: (none; completion code only)
export const NETFN = 0x00;
export const CMD = 0x02;

export const Control = {
  POWER_DOWN: 0,
  POWER_UP: 1,
  POWER_CYCLE: 2,
  HARD_RESET: 3,
  SOFT_SHUTDOWN: 5,
} as const;

export function encode(control: number): Buffer {
  return Buffer.from([control & 0x0f]);
}
