// BMC metrics: every call a BMC driver makes for fastfence (status read, off, on, cycle,
// prepare) counted by driver, operation and result, and timed, through one wrapper
// (meteredDriver) that the power executor and the BMC health check put around each driver
// they build. Also the BMC health gauges the health check (infra/fence/health.ts) sets, and
// the count of fence's last looks before an off command (infra/fence/last-look.ts).
// Results are a small fixed vocabulary taken from the typed BMC errors (auth-failed,
// unreachable, timeout, ...), never a message, an address or a credential; the wrapper
// changes no outcome: it returns and throws exactly what the driver does.
import { FastfenceError } from "../../core/errors.ts";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BmcCallOptions, BmcDriver } from "./driver.ts";

/** What one BMC call (or one health check) ended with. */
export const BMC_RESULTS = [
  "ok",
  "auth-failed",
  "unreachable",
  "timeout",
  "unsupported",
  "protocol",
  "cancelled",
  "error",
] as const;
export type BmcResult = (typeof BMC_RESULTS)[number];

/** A health check also ends here when the level's credentials Secret is missing or unusable. */
export type BmcCheckResult = BmcResult | "credentials";

export type BmcOperation = "status" | "off" | "on" | "cycle" | "prepare";

export interface BmcMetrics {
  /** BMC calls by driver (the level's protocol), operation and result. */
  bmcCalls: Counter<"driver" | "operation" | "result">;
  /** BMC call duration by driver and operation, seconds. */
  bmcCallSeconds: Histogram<"driver" | "operation">;
  /** 1 when the last health check of the node's level read its power state, else 0. */
  bmcUp: Gauge<"node" | "level" | "driver">;
  /** The last health check's result of the node's level: one series per level, value 1. */
  bmcCheckResult: Gauge<"node" | "level" | "driver" | "result">;
  /** 1 for each way a node's fencing level reaches its BMC insecurely (plain-http, no-cert-check), allowed by its insecure: true. */
  bmcInsecure: Gauge<"node" | "level" | "driver" | "mode">;
  /** fence's last looks before an off command, by result (go, NodeResponding, NodeRebooted). */
  lastLooks: Counter<"result">;
}

const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20];

export function createBmcMetrics(registry: Registry): BmcMetrics {
  return {
    bmcCalls: new Counter({
      name: "fastfence_bmc_calls_total",
      help: "BMC calls by driver, operation (status, off, on, cycle, prepare) and result.",
      labelNames: ["driver", "operation", "result"],
      registers: [registry],
    }),
    bmcCallSeconds: new Histogram({
      name: "fastfence_bmc_call_duration_seconds",
      help: "BMC call duration by driver and operation.",
      labelNames: ["driver", "operation"],
      buckets: CALL_BUCKETS,
      registers: [registry],
    }),
    bmcUp: new Gauge({
      name: "fastfence_bmc_up",
      help: "1 when the last BMC health check of the node's fencing level read its power state, else 0.",
      labelNames: ["node", "level", "driver"],
      registers: [registry],
    }),
    bmcCheckResult: new Gauge({
      name: "fastfence_bmc_check_result",
      help: "Result of the last BMC health check of the node's fencing level (value 1; auth-failed: credentials rejected).",
      labelNames: ["node", "level", "driver", "result"],
      registers: [registry],
    }),
    bmcInsecure: new Gauge({
      name: "fastfence_bmc_insecure",
      help: "1 for each way a node's fencing level reaches its BMC insecurely (mode plain-http, no-cert-check, plaintext or weak-tls: core/level-security.ts), allowed by the level's insecure: true; set by the BMC health check.",
      labelNames: ["node", "level", "driver", "mode"],
      registers: [registry],
    }),
    lastLooks: new Counter({
      name: "fastfence_last_look_total",
      help: "fence's last looks at a node just before an off command, by result: go (still unreachable) or the reason the round was abandoned (NodeResponding, NodeRebooted).",
      labelNames: ["result"],
      registers: [registry],
    }),
  };
}

const RESULT_BY_CODE: Partial<Record<string, BmcResult>> = {
  FF_BMC_AUTH_FAILED: "auth-failed",
  FF_BMC_UNREACHABLE: "unreachable",
  FF_BMC_TIMEOUT: "timeout",
  FF_BMC_UNSUPPORTED: "unsupported",
  FF_BMC_PROTOCOL: "protocol",
  FF_CANCELLED: "cancelled",
};

/** The result word of a failed BMC call (a typed BMC error's code; anything else "error"). */
export function bmcResultOf(err: unknown): BmcResult {
  return (err instanceof FastfenceError && RESULT_BY_CODE[err.code]) || "error";
}

/**
 * `driver` with every call counted and timed under the level's protocol `protocol`
 * (redfish, ipmi, fence-agent). Outcomes pass through unchanged.
 */
export function meteredDriver(
  driver: BmcDriver,
  protocol: string,
  m: Pick<BmcMetrics, "bmcCalls" | "bmcCallSeconds">,
): BmcDriver {
  const timed = async <T>(operation: BmcOperation, call: () => Promise<T>): Promise<T> => {
    const end = m.bmcCallSeconds.startTimer({ driver: protocol, operation });
    try {
      const r = await call();
      m.bmcCalls.inc({ driver: protocol, operation, result: "ok" });
      return r;
    } catch (err) {
      m.bmcCalls.inc({ driver: protocol, operation, result: bmcResultOf(err) });
      throw err;
    } finally {
      end();
    }
  };
  const { prepare, cycle, close } = driver;
  return {
    kind: driver.kind,
    target: driver.target,
    status: (o: BmcCallOptions) => timed("status", () => driver.status(o)),
    off: (o: BmcCallOptions) => timed("off", () => driver.off(o)),
    on: (o: BmcCallOptions) => timed("on", () => driver.on(o)),
    ...(cycle ? { cycle: (o: BmcCallOptions) => timed("cycle", () => cycle.call(driver, o)) } : {}),
    ...(prepare ? { prepare: (o: BmcCallOptions) => timed("prepare", () => prepare.call(driver, o)) } : {}),
    ...(close ? { close: () => close.call(driver) } : {}),
  };
}
