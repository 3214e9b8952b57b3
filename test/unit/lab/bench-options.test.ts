import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { BenchUsageError, parseBenchArgs } from "../../../lab/bench-options.ts";

const refused = (args: string[]) => {
  try {
    parseBenchArgs(args);
  } catch (err) {
    expect(err).toBeInstanceOf(BenchUsageError);
    return (err as Error).message;
  }
  throw new Error(`${args.join(" ")} was accepted`);
};

describe("make bench's options", () => {
  it("defaults: the compact plane with OpenShift's settings, 5 etcd-leader and 5 Lease trials", () => {
    const o = parseBenchArgs([]);
    expect(o).toMatchObject({
      K: 20,
      KC: 5,
      CONTROL_PLANE: "compact",
      LEADER_ELECTION: "openshift",
      BROKERS: "lab",
    });
    expect(o.ROLE_TRIALS).toEqual({ etcdLeader: 5, leases: 5 });
    const h = parseBenchArgs(["--control-plane", "host", "--brokers", "shipped"]);
    expect(h).toMatchObject({
      CONTROL_PLANE: "host",
      ROLE_TRIALS: { etcdLeader: 0, leases: 0 },
      BROKERS: "shipped",
    });
    expect(parseBenchArgs([], { FASTFENCE_LAB_BROKERS: "shipped" }).BROKERS).toBe("shipped");
  });

  it("refuses what it cannot run, naming the option", () => {
    expect(refused(["--control-plane", "moon"])).toMatch(/--control-plane takes compact or host, got "moon"/);
    expect(refused(["--leader-election", "fast"])).toMatch(
      /--leader-election takes openshift or upstream, got "fast"/,
    );
    expect(refused(["--control-plane", "host", "--lease-trials", "3"])).toMatch(
      /--etcd-leader-trials and --lease-trials need the compact control plane/,
    );
    expect(refused(["--etcd-leader-trials", "two"])).toMatch(
      /--etcd-leader-trials must be a whole number ≥ 0, got "two"/,
    );
    expect(refused(["--scenarios", "crash,meteor"])).toMatch(/unknown scenario meteor/);
    expect(refused(["--hang-waits", "0,,5"])).toMatch(/--hang-waits takes seconds/);
    expect(refused(["--brokers", "fast"])).toMatch(
      /--brokers: FASTFENCE_LAB_BROKERS must be "lab" or "shipped"/,
    );
    expect(refused(["--trails", "3"])).toMatch(/Unknown option '--trails'/);
  });

  it("the bench exits 2 with its usage on a bad option, before any lab starts", () => {
    const a = spawnSync(process.execPath, ["bench/lab.ts", "--control-plane", "moon"], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(a.status).toBe(2);
    expect(a.stderr).toMatch(
      /bench\/lab\.ts: --control-plane takes compact or host, got "moon"\nusage: node bench\/lab\.ts/,
    );
  });
});
