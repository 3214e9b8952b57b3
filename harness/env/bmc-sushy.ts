// Starts sushy-tools' sushy-emulator (the Redfish emulator metal3 uses) from the project
// venv with its fake systems driver, HTTP basic auth (bcrypt htpasswd file) and a private
// state directory, on a free loopback port. Returns { url, port, credentials, systems, stop }.
// The fake driver applies a power change 1-11 s after the Reset call (like real hardware).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { freeTcpPort, ROOT, RUN_DIR, spawnGroup, waitFor } from "./bmc-spawn.ts";
import { timedStart } from "./start-times.ts";

export const SUSHY_BIN = path.join(ROOT, ".cache/venv/bin/sushy-emulator");
const PYTHON = path.join(ROOT, ".cache/venv/bin/python");

export interface Sushy {
  url: string;
  port: number;
  username: string;
  password: string;
  systemId: string;
  systemPath: string;
  stop(): Promise<void>;
  logTail(): string;
}

async function startSushyNow(
  opts: { username?: string; password?: string; power?: "On" | "Off" } = {},
): Promise<Sushy> {
  mkdirSync(RUN_DIR, { recursive: true });
  const dir = mkdtempSync(path.join(RUN_DIR, "sushy-"));
  const username = opts.username ?? "admin";
  const password = opts.password ?? `pw-${Math.random().toString(36).slice(2)}-Sushy`;
  const hash = execFileSync(
    PYTHON,
    ["-c", "import bcrypt,sys; print(bcrypt.hashpw(sys.stdin.buffer.read(), bcrypt.gensalt(4)).decode())"],
    {
      input: password,
    },
  )
    .toString()
    .trim();
  writeFileSync(path.join(dir, "htpasswd"), `${username}:${hash}\n`, { mode: 0o600 });
  const port = await freeTcpPort();
  const systemId = "27946b59-9e44-4fa7-8e91-f3527a1ef094";
  const config = `
SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'
SUSHY_EMULATOR_LISTEN_PORT = ${port}
SUSHY_EMULATOR_AUTH_FILE = ${JSON.stringify(path.join(dir, "htpasswd"))}
SUSHY_EMULATOR_STATE_DIR = ${JSON.stringify(path.join(dir, "state"))}
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_FAKE_SYSTEMS = [{
    'uuid': '${systemId}',
    'name': 'fake',
    'power_state': '${opts.power ?? "On"}',
    'external_notifier': False,
    'nics': [{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}],
}]
`;
  writeFileSync(path.join(dir, "sushy.conf"), config);
  const proc = spawnGroup("sushy", SUSHY_BIN, ["--config", path.join(dir, "sushy.conf")], {
    env: { ...process.env, TMPDIR: dir, PYTHONDONTWRITEBYTECODE: "1" },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      "sushy-emulator",
      async () => (await fetch(`${url}/redfish/v1/`, { signal: AbortSignal.timeout(1000) })).ok,
      { timeoutMs: 30_000, proc },
    );
  } catch (err) {
    await proc.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url,
    port,
    username,
    password,
    systemId,
    systemPath: `/redfish/v1/Systems/${systemId}`,
    logTail: () => proc.logTail(),
    stop: async () => {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Start sushy-tools; timed (start-times.ts). */
export function startSushy(opts: Parameters<typeof startSushyNow>[0] = {}): Promise<Sushy> {
  return timedStart("bmc-sushy", "sushy-tools", () => startSushyNow(opts));
}
