// Small argument parsers shared by the subcommands. Each throws FF_INVALID_CONFIG naming
// the option and the bad value; none exits the process.
import { FastfenceError } from "../core/errors.ts";

/** A TCP port from an option value (0 = any free port); undefined when the option was not given. */
export function parsePort(option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!(Number.isInteger(port) && port >= 0 && port < 65536))
    throw new FastfenceError("FF_INVALID_CONFIG", `${option} needs a port number 0-65535, not "${value}"`);
  return port;
}
