// `fastfence bmc status|off|on|check`: talk to one BMC by URL (ipmi://, redfish://,
// redfish+http(s)://, idrac-redfish://, ilo5-redfish://, fence-agent://...?agent=fence_x).
// Credentials come from FASTFENCE_BMC_USERNAME / FASTFENCE_BMC_PASSWORD or
// --credentials-file (JSON {"username","password"} or username=/password= lines); never
// from argv and never printed. `off` returns only after power-off is read back (S1);
// `check` verifies the credentials and reads power state without changing it.
// Exit codes: 0 done, 1 BMC failure, 2 usage error.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { FastfenceError } from "../core/errors.ts";
import { powerOffAndConfirm, type BmcDriver } from "../infra/bmc/driver.ts";
import { buildDriver, parseBmcAddress, redactAddress, type BmcCredentials } from "../infra/bmc/settings.ts";

const HELP = `Usage: fastfence bmc <status|off|on|check> --url URL [options]

  --url URL               BMC address: ipmi://host[:port], redfish://host/redfish/v1/Systems/ID,
                          redfish+http://..., idrac-redfish://..., ilo5-redfish://...,
                          fence-agent://host[:port]?agent=fence_ipmilan&lanplus=1
  --node NAME             take the settings from the cluster (not yet supported: use --url)
  --credentials-file F    JSON {"username":..,"password":..} or username=/password= lines
                          (default: FASTFENCE_BMC_USERNAME / FASTFENCE_BMC_PASSWORD)
  --insecure              skip TLS verification (Redfish)
  --ca FILE               PEM CA bundle for the BMC's certificate (Redfish)
  --timeout-ms N          budget for the whole action (default 30000)
  --poll-ms N             read-back interval for off (default 200)
  --json                  print one JSON object

status  read power state          off  power off and wait until it reads back off
on      power on                   check  verify credentials, read state, change nothing`;

function usage(msg: string): number {
  console.error(`fastfence bmc: ${msg}\n\n${HELP}`);
  return 2;
}

export function readCredentials(file: string | undefined, env: NodeJS.ProcessEnv): BmcCredentials | string {
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return `cannot read credentials file ${file}`;
    }
    const t = text.trim();
    if (t.startsWith("{")) {
      try {
        const j = JSON.parse(t) as { username?: unknown; password?: unknown };
        if (typeof j.username === "string" && typeof j.password === "string")
          return { username: j.username, password: j.password };
      } catch {
        return `credentials file ${file} is not valid JSON`;
      }
      return `credentials file ${file} needs "username" and "password"`;
    }
    const kv = new Map<string, string>();
    for (const line of t.split("\n")) {
      const i = line.indexOf("=");
      if (i > 0) kv.set(line.slice(0, i).trim(), line.slice(i + 1).replace(/\r$/, ""));
    }
    const username = kv.get("username");
    const password = kv.get("password");
    if (username && password !== undefined) return { username, password };
    return `credentials file ${file} needs username= and password= lines`;
  }
  const username = env.FASTFENCE_BMC_USERNAME;
  const password = env.FASTFENCE_BMC_PASSWORD;
  if (!username || password === undefined) {
    return "no credentials: set FASTFENCE_BMC_USERNAME and FASTFENCE_BMC_PASSWORD, or use --credentials-file";
  }
  return { username, password };
}

export async function bmcCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: "string" },
        node: { type: "string" },
        "credentials-file": { type: "string" },
        insecure: { type: "boolean" },
        ca: { type: "string" },
        "timeout-ms": { type: "string" },
        "poll-ms": { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    return usage(err instanceof Error ? err.message : String(err));
  }
  const { values: v, positionals } = parsed;
  if (v.help) {
    console.log(HELP);
    return 0;
  }
  const action = positionals[0];
  if (!action || !["status", "off", "on", "check"].includes(action) || positionals.length > 1) {
    return usage(`expected one action: status, off, on or check`);
  }
  if (v.node && !v.url) {
    console.error("fastfence bmc: --node (settings from the cluster) is not yet supported; use --url");
    return 2;
  }
  if (!v.url) return usage("--url is required");
  const timeoutMs = Number(v["timeout-ms"] ?? 30_000);
  const pollMs = Number(v["poll-ms"] ?? 200);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || !Number.isFinite(pollMs) || pollMs <= 0) {
    return usage("--timeout-ms and --poll-ms take positive numbers");
  }
  try {
    parseBmcAddress(v.url);
  } catch (err) {
    return usage(err instanceof FastfenceError ? err.message : "bad --url");
  }
  const creds = readCredentials(v["credentials-file"], process.env);
  if (typeof creds === "string") return usage(creds);
  let ca: string | undefined;
  if (v.ca) {
    try {
      ca = readFileSync(v.ca, "utf8");
    } catch {
      return usage(`cannot read CA bundle ${v.ca}`);
    }
  }

  const driver: BmcDriver = buildDriver(v.url, creds, { insecure: v.insecure, ca });
  const target = redactAddress(v.url);
  const out = (human: string, obj: Record<string, unknown>) =>
    console.log(v.json ? JSON.stringify({ action, target, ...obj }) : human);
  const started = Date.now();
  try {
    switch (action) {
      case "status":
      case "check": {
        const st = await driver.status({ timeoutMs });
        out(
          action === "check"
            ? `ok: ${target} accepted the credentials; power is ${st.state} (${st.raw})`
            : `${st.state} (${st.raw})`,
          { ok: true, power: st.state, raw: st.raw, ms: Date.now() - started },
        );
        return 0;
      }
      case "off": {
        const r = await powerOffAndConfirm(driver, { timeoutMs, pollMs, now: () => Date.now() });
        const ms = r.confirmedAt - r.offIssuedAt;
        out(`off: power-off confirmed by read-back after ${ms} ms (${r.readbacks.length} reads)`, {
          ok: true,
          power: "off",
          confirmMs: ms,
          readbacks: r.readbacks.length,
        });
        return 0;
      }
      case "on": {
        await driver.on({ timeoutMs });
        const st = await driver.status({ timeoutMs });
        out(`on: command accepted; power now reads ${st.state} (${st.raw})`, {
          ok: true,
          power: st.state,
          raw: st.raw,
        });
        return 0;
      }
    }
    return 2;
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    if (v.json)
      console.log(
        JSON.stringify({
          action,
          target,
          ok: false,
          code: fe?.code ?? "FF_INTERNAL",
          error: fe?.message ?? "unexpected error",
        }),
      );
    else
      console.error(
        `fastfence bmc ${action}: ${fe?.code ?? "FF_INTERNAL"}: ${fe?.message ?? "unexpected error"}`,
      );
    return 1;
  } finally {
    await driver.close?.();
  }
}
