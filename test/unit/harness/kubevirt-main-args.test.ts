// The VM controller stand-in's command line (harness/kubevirt/vm-controller-main.ts):
// virt-controller's leader-election defaults, the flags, and clear errors for bad input.
import { describe, expect, it } from "vitest";
import { parseStandInArgs, UsageError } from "../../../harness/kubevirt/vm-controller-main.ts";

describe("stand-in command line", () => {
  it("defaults to virt-controller's Lease and settings, no release on cancel", () => {
    expect(parseStandInArgs(["--kubeconfig=k", "--identity=node-a"])).toEqual({
      kubeconfig: "k",
      identity: "node-a",
      leaseNamespace: "kubevirt",
      leaseName: "virt-controller",
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      intervalMs: 100,
      releaseOnCancel: false,
    });
  });

  it("takes OpenShift-like settings, namespaces and the release flag", () => {
    const o = parseStandInArgs([
      "--kubeconfig=k",
      "--identity=a",
      "--lease-namespace=openshift-cnv",
      "--namespaces=vms,other",
      "--lease-duration-s=137",
      "--renew-deadline-s=107",
      "--retry-period-s=26",
      "--release-on-cancel",
    ]);
    expect(o).toMatchObject({
      leaseNamespace: "openshift-cnv",
      namespaces: ["vms", "other"],
      leaseDurationMs: 137_000,
      renewDeadlineMs: 107_000,
      retryPeriodMs: 26_000,
      releaseOnCancel: true,
    });
  });

  it("--identity-host names it <host>_<uuid>, new at each start (client-go's host-network form)", () => {
    const a = parseStandInArgs(["--kubeconfig=k", "--identity-host=node-a"]).identity;
    const b = parseStandInArgs(["--kubeconfig=k", "--identity-host=node-a"]).identity;
    expect(a).toMatch(/^node-a_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(b).not.toBe(a);
  });

  it("names what is missing or wrong", () => {
    expect(() => parseStandInArgs(["--identity=a"])).toThrow(new UsageError("--kubeconfig is required"));
    expect(() => parseStandInArgs(["--kubeconfig=k"])).toThrow(/--identity or --identity-host is required/);
    expect(() => parseStandInArgs(["--kubeconfig=k", "--identity=a", "--identity-host=node-a"])).toThrow(
      /give one/,
    );
    expect(() => parseStandInArgs(["--kubeconfig=k", "--identity-host=Node_A"])).toThrow(
      /--identity-host must be a host name, got "Node_A"/,
    );
    expect(() => parseStandInArgs(["--kubeconfig=k", "--identity=a", "--retry-period-s=0"])).toThrow(
      /--retry-period-s must be a positive number, got "0"/,
    );
    expect(() => parseStandInArgs(["--kubeconfig=k", "--identity=a", "--bogus"])).toThrow(/bogus/);
  });
});
