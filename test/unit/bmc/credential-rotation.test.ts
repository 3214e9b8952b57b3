// Rotated BMC credentials (infra/fence/power.ts, infra/fence/driver-pool.ts,
// namingSecret in infra/bmc/credentials.ts), with a fake Kube holding the Secrets and fake
// drivers against a fake BMC that checks the password: every power action reads the Secret
// as it is now (a prepare and its powerOff share one read), an unchanged Secret keeps its
// driver, a changed one gets a new driver and the old one is closed once unused, and a
// rejected password gives an attempt whose message names the Secret and holds no credential.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../core/clock.ts";
import type { Action } from "../../../core/decision.ts";
import { levelsForNode, resolvePolicy, type FencingPolicySpec } from "../../../core/policy.ts";
import { namingSecret, type BmcCredentials } from "../../../infra/bmc/credentials.ts";
import {
  BmcAuthError,
  BmcUnreachableError,
  type BmcCallOptions,
  type BmcDriver,
} from "../../../infra/bmc/driver.ts";
import { DriverPool } from "../../../infra/fence/driver-pool.ts";
import { BmcPowerExecutor, HEAD_START_MAX_AGE_MS } from "../../../infra/fence/power.ts";
import { KubeApiError } from "../../../infra/kube/client.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

const NS = "fastfence-system";
const NODE = "worker-0";
const USER = "fence";
const PW_A = "Pw-A-7f3kq";
const PW_B = "Pw-B-9zLm2";
const WRONG = "Pw-wrong-x1";

/** One BMC: its current password and power; fake drivers check against it. */
class FakeBmc {
  password = PW_A;
  power: "on" | "off" = "on";
  logins = 0;
}

/** A driver as the real ones behave: logs in on prepare (once), rejects a wrong password. */
class FakeDriver implements BmcDriver {
  readonly kind = "redfish";
  readonly target = "http://bmc-0/redfish/v1/Systems/1";
  closed = false;
  private session = false;
  private readonly bmc: FakeBmc;
  readonly creds: BmcCredentials;
  constructor(bmc: FakeBmc, creds: BmcCredentials) {
    this.bmc = bmc;
    this.creds = creds;
  }
  private async login(): Promise<void> {
    if (this.closed) throw new BmcUnreachableError(this.target, "driver closed");
    if (this.session) return;
    if (this.creds.password !== this.bmc.password) throw new BmcAuthError(this.target);
    this.bmc.logins++;
    this.session = true;
  }
  async prepare(_o: BmcCallOptions) {
    await this.login();
  }
  async status(_o: BmcCallOptions) {
    await this.login();
    return { state: this.bmc.power, raw: this.bmc.power === "on" ? "On" : "Off" };
  }
  async off(_o: BmcCallOptions) {
    await this.login();
    this.bmc.power = "off";
  }
  async on(_o: BmcCallOptions) {
    await this.login();
    this.bmc.power = "on";
  }
  async close() {
    this.closed = true;
  }
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** A Kube whose only call is reading Secrets from `secrets` (by "ns/name"), counting GETs. */
function fakeKube(secrets: Map<string, string>) {
  const gets: string[] = [];
  const kube = kubeAnswering(async (what: string, fn: (apis: unknown) => Promise<unknown>) =>
    fn({
      core: {
        readNamespacedSecret: async ({ name, namespace }: { name: string; namespace: string }) => {
          gets.push(`${namespace}/${name}`);
          const pw = secrets.get(`${namespace}/${name}`);
          if (pw === undefined) throw new KubeApiError(404, what, { message: "not found" }, undefined);
          return { data: { username: b64(USER), password: b64(pw) } };
        },
      },
    }),
  );
  return { kube, gets };
}

function setup(
  levels: { driver: "redfish" | "ipmi"; secret: string }[] = [{ driver: "redfish", secret: "bmc-0" }],
) {
  const bmc = new FakeBmc();
  const secrets = new Map<string, string>(levels.map((l) => [`${NS}/${l.secret}`, PW_A]));
  const { kube, gets } = fakeKube(secrets);
  const clock = new ManualClock(1_000_000);
  const drivers: FakeDriver[] = [];
  const power = new BmcPowerExecutor(kube, NS, clock, undefined, {
    driverFor: (_address, creds) => {
      const d = new FakeDriver(bmc, creds);
      drivers.push(d);
      return d;
    },
  });
  const policy: FencingPolicySpec = resolvePolicy({
    fencing: {
      nodes: [
        {
          nodeSelector: { names: [NODE] },
          levels: levels.map((l, i) => ({
            driver: l.driver,
            address:
              l.driver === "ipmi" ? `ipmi://10.0.0.${i}` : `redfish+http://10.0.0.${i}/redfish/v1/Systems/1`,
            credentialsSecret: l.secret,
            ...(l.driver === "ipmi" ? {} : { insecure: true }),
          })),
        },
      ],
    },
  });
  let round = 0;
  const action = (): Extract<Action, { kind: "powerOff" }> => ({
    kind: "powerOff",
    node: NODE,
    incident: `${NODE}-x`,
    round: ++round,
    holder: "fence-test",
    levels: levelsForNode(policy, { name: NODE })!,
    timeoutMs: policy.timeouts.powerOffTimeoutMs,
  });
  const signal = new AbortController().signal;
  const off = async (prepare = true) => {
    bmc.power = "on";
    const a = action();
    if (prepare) void power.prepare(a, signal);
    return power.powerOff(a, policy, signal);
  };
  const powerOn = () =>
    power.powerOn(
      { kind: "powerOn", node: NODE, incident: `${NODE}-x`, levels: levelsForNode(policy, { name: NODE })! },
      policy,
      signal,
    );
  const rotate = (pw: string, onBmc = true) => {
    for (const k of secrets.keys()) secrets.set(k, pw);
    if (onBmc) bmc.password = pw;
  };
  return { bmc, gets, clock, drivers, power, action, off, powerOn, rotate, secrets, policy, signal };
}

describe("BmcPowerExecutor and rotated credentials", () => {
  it("a prepare and its powerOff share one Secret read and one driver (one login)", async () => {
    const t = setup();
    const attempts = await t.off();
    expect(attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    expect(t.gets).toEqual([`${NS}/bmc-0`]);
    expect(t.drivers).toHaveLength(1);
    expect(t.bmc.logins).toBe(1);
  });

  it("an unchanged Secret is read once per action and keeps its driver and session", async () => {
    const t = setup();
    await t.off();
    await t.off(false);
    await t.powerOn();
    expect(t.gets).toHaveLength(3);
    expect(t.drivers).toHaveLength(1);
    expect(t.bmc.logins).toBe(1);
    expect(t.bmc.power).toBe("on");
  });

  it("a rotated Secret is used by the next action without a restart; the old driver is closed", async () => {
    const t = setup();
    expect(await t.off()).toMatchObject([{ result: "off-confirmed" }]);
    t.rotate(PW_B);
    expect(await t.off()).toMatchObject([{ result: "off-confirmed" }]);
    expect(t.drivers.map((d) => d.creds.password)).toEqual([PW_A, PW_B]);
    await Promise.resolve();
    expect(t.drivers[0]!.closed).toBe(true);
    expect(t.drivers[1]!.closed).toBe(false);
  });

  it("a wrong password: the attempt says the BMC rejected the credentials from Secret ns/name, without them; fixed, the next action succeeds", async () => {
    const t = setup();
    t.rotate(WRONG, false);
    const bad = await t.off();
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatchObject({ result: "auth-failed", errorCode: "FF_BMC_AUTH_FAILED" });
    expect(bad[0]!.message).toBe(
      `BMC http://bmc-0/redfish/v1/Systems/1 rejected the credentials from Secret ${NS}/bmc-0`,
    );
    expect(JSON.stringify(bad)).not.toContain(WRONG);
    expect(JSON.stringify(bad)).not.toContain(PW_A);
    expect(t.bmc.power).toBe("on");
    t.rotate(PW_A, false);
    expect(await t.off()).toMatchObject([{ result: "off-confirmed" }]);
    expect(t.bmc.power).toBe("off");
  });

  it("a prepare's read older than HEAD_START_MAX_AGE_MS is not taken: the powerOff reads the rotated Secret", async () => {
    const t = setup();
    const a = t.action();
    await t.power.prepare(a, t.signal);
    t.rotate(PW_B);
    t.clock.advance(HEAD_START_MAX_AGE_MS + 1);
    expect(await t.power.powerOff(a, t.policy, t.signal)).toMatchObject([{ result: "off-confirmed" }]);
    expect(t.gets).toHaveLength(2);
    expect(t.drivers.map((d) => d.creds.password)).toEqual([PW_A, PW_B]);
  });

  it("a prepare's read is taken by its own powerOff only (another round reads again)", async () => {
    const t = setup();
    const a = t.action();
    await t.power.prepare(a, t.signal);
    await t.power.powerOff(t.action(), t.policy, t.signal);
    expect(t.gets).toHaveLength(2);
  });

  it("a Secret shared by two levels is read once per round; a missing Secret is an error attempt naming it", async () => {
    const t = setup([
      { driver: "redfish", secret: "bmc-0" },
      { driver: "ipmi", secret: "bmc-0" },
    ]);
    await t.off(false);
    expect(t.gets).toEqual([`${NS}/bmc-0`]);
    t.secrets.delete(`${NS}/bmc-0`);
    const r = await t.off(false);
    expect(r).toMatchObject([{ result: "error", errorCode: "FF_KUBE_NOT_FOUND" }]);
    expect(r[0]!.message).toContain(`${NS}/bmc-0`);
  });

  it("powerOn reads the Secret as it is now; a wrong one fails naming the Secret", async () => {
    const t = setup();
    await t.off();
    t.rotate(PW_B);
    await t.powerOn();
    expect(t.bmc.power).toBe("on");
    expect(t.drivers.at(-1)!.creds.password).toBe(PW_B);
    t.rotate(WRONG, false);
    const err = await t.powerOn().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain(`rejected the credentials from Secret ${NS}/bmc-0`);
    expect((err as Error).message).not.toContain(WRONG);
  });
});

describe("DriverPool", () => {
  const creds = (password: string) => ({ username: USER, password });
  const build = (bmc: FakeBmc) => (c: BmcCredentials) => new FakeDriver(bmc, c);

  it("keeps a slot's driver for the same credentials and builds a new one for others", () => {
    const pool = new DriverPool();
    const bmc = new FakeBmc();
    const a = pool.use("s", creds(PW_A), build(bmc));
    const a2 = pool.use("s", { ...creds(PW_A) }, build(bmc));
    expect(a2.driver).toBe(a.driver);
    expect([a.fresh, a2.fresh]).toEqual([true, false]);
    const b = pool.use("s", creds(PW_B), build(bmc));
    expect(b.driver).not.toBe(a.driver);
    expect(b).toMatchObject({ fresh: true, replaced: true });
    expect(pool.use("other", creds(PW_B), build(bmc)).driver).not.toBe(b.driver);
  });

  it("closes a replaced driver only once the last action using it releases it", async () => {
    const pool = new DriverPool();
    const bmc = new FakeBmc();
    const a = pool.use("s", creds(PW_A), build(bmc));
    const old = a.driver as FakeDriver;
    pool.use("s", creds(PW_B), build(bmc)).release();
    expect(old.closed).toBe(false);
    a.release();
    a.release(); // idempotent
    await Promise.resolve();
    expect(old.closed).toBe(true);
  });

  it("a build that throws leaves the slot's driver in place", () => {
    const pool = new DriverPool();
    const bmc = new FakeBmc();
    const a = pool.use("s", creds(PW_A), build(bmc));
    expect(() =>
      pool.use("s", creds(PW_B), () => {
        throw new Error("bad address");
      }),
    ).toThrow("bad address");
    expect(pool.use("s", creds(PW_A), build(bmc)).driver).toBe(a.driver);
  });
});

describe("namingSecret", () => {
  it("names the Secret in a BMC's rejection and passes everything else through", async () => {
    const bmc = new FakeBmc();
    const ref = { namespace: "metal3", name: "worker-1-bmc" };
    const wrong = namingSecret(new FakeDriver(bmc, { username: USER, password: WRONG }), ref);
    const err = await wrong.off({ timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BmcAuthError);
    expect(err).toMatchObject({
      code: "FF_BMC_AUTH_FAILED",
      secret: "metal3/worker-1-bmc",
      retriable: false,
    });
    expect((err as Error).message).toBe(
      "BMC http://bmc-0/redfish/v1/Systems/1 rejected the credentials from Secret metal3/worker-1-bmc",
    );
    const inner = new FakeDriver(bmc, { username: USER, password: PW_A });
    const right = namingSecret(inner, ref);
    await right.off({ timeoutMs: 1000 });
    expect(bmc.power).toBe("off");
    await right.close?.();
    expect(inner.closed).toBe(true);
    const unreachable = await right.status({ timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(unreachable).toBeInstanceOf(BmcUnreachableError);
  });
});
