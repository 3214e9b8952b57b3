// The VM controller stand-in's decisions (harness/kubevirt/vm-steps.pure.ts) on plain data:
// KubeVirt's path from a lost launcher pod to a new VMI for runStrategy Always and
// RerunOnFailure, a RerunOnFailure VM left stopped when its VMI was deleted by someone
// else, finalizers, and never a second VMI or pod while one exists.
import { describe, expect, it } from "vitest";
import {
  currentPod,
  VM_FINALIZER,
  VMI_FINALIZER,
  vmiSteps,
  vmSteps,
  type LauncherPod,
  type Vm,
  type Vmi,
} from "../../../harness/kubevirt/vm-steps.pure.ts";

const vm = (runStrategy: string, extra: Partial<Vm> = {}): Vm => ({
  namespace: "vms",
  name: "vm1",
  uid: "vm-uid",
  runStrategy,
  statusRunStrategy: runStrategy,
  startRequested: false,
  ...extra,
});
const vmi = (extra: Partial<Vmi> = {}): Vmi => ({
  namespace: "vms",
  name: "vm1",
  uid: "vmi-1",
  phase: "Running",
  deleting: false,
  finalizers: [VM_FINALIZER, VMI_FINALIZER],
  nodeName: "a",
  ...extra,
});
const pod = (extra: Partial<LauncherPod> = {}): LauncherPod => ({
  name: "virt-launcher-vm1-x",
  vmiUid: "vmi-1",
  nodeName: "a",
  phase: "Running",
  ready: true,
  deleting: false,
  createdMs: 1,
  ...extra,
});
const kinds = (steps: { kind: string }[]) => steps.map((s) => s.kind);
const READY = new Set(["a", "b"]);

describe("stand-in VMI steps (virt-controller's VMI controller)", () => {
  it("a Running or Scheduled VMI whose launcher pod is gone fails; a terminating pod keeps it Running", () => {
    expect(vmiSteps(vmi(), [], READY, true)).toEqual([{ kind: "phase", phase: "Failed" }]);
    expect(vmiSteps(vmi({ phase: "Scheduled" }), [], READY, true)).toEqual([
      { kind: "phase", phase: "Failed" },
    ]);
    expect(vmiSteps(vmi(), [pod({ deleting: true })], READY, true)).toEqual([]);
    // A pod of this VMI on another node is not its current pod.
    expect(vmiSteps(vmi(), [pod({ nodeName: "b" })], READY, true)).toEqual([
      { kind: "phase", phase: "Failed" },
    ]);
  });

  it("a new VMI gets one launcher pod; Scheduling → Scheduled on a ready pod → Running on a Ready node", () => {
    const fresh = vmi({ phase: "", nodeName: undefined } as Partial<Vmi>);
    delete (fresh as Partial<Vmi>).nodeName;
    expect(kinds(vmiSteps(fresh, [], READY, true))).toEqual(["createPod", "phase"]);
    expect(
      vmiSteps({ ...fresh, phase: "Pending" }, [pod({ phase: "Pending", ready: false })], READY, true),
    ).toEqual([{ kind: "phase", phase: "Scheduling" }]);
    const sched = { ...fresh, phase: "Scheduling" as const };
    expect(vmiSteps(sched, [pod({ phase: "Pending", ready: false })], READY, true)).toEqual([]);
    expect(vmiSteps(sched, [pod({ nodeName: "b" })], READY, true)).toEqual([
      { kind: "phase", phase: "Scheduled", nodeName: "b" },
    ]);
    expect(vmiSteps(sched, [pod({ deleting: true, ready: false })], READY, true)).toEqual([
      { kind: "phase", phase: "Failed" },
    ]);
    const scheduled = vmi({ phase: "Scheduled", nodeName: "b" });
    expect(vmiSteps(scheduled, [pod({ nodeName: "b" })], READY, true)).toEqual([
      { kind: "phase", phase: "Running" },
    ]);
    // kwok plays virt-handler only on a Ready node.
    expect(vmiSteps(scheduled, [pod({ nodeName: "b" })], new Set(["a"]), true)).toEqual([]);
  });

  it("a deleted VMI deletes its pods, fails when they are gone, then drops its own finalizer", () => {
    const del = vmi({ deleting: true });
    expect(vmiSteps(del, [pod()], READY, true)).toEqual([
      { kind: "deletePods", names: ["virt-launcher-vm1-x"] },
    ]);
    expect(vmiSteps(del, [], READY, true)).toEqual([{ kind: "phase", phase: "Failed" }]);
    expect(vmiSteps({ ...del, phase: "Failed" }, [], READY, true)).toEqual([
      { kind: "removeFinalizers", finalizers: [VMI_FINALIZER] },
    ]);
  });

  it("a final VMI keeps its finalizer while a pod it controls exists; the VM's finalizer only goes without a VM", () => {
    expect(vmiSteps(vmi({ phase: "Failed" }), [pod({ nodeName: "b" })], READY, true)).toEqual([]);
    expect(vmiSteps(vmi({ phase: "Failed" }), [], READY, false)).toEqual([
      { kind: "removeFinalizers", finalizers: [VMI_FINALIZER, VM_FINALIZER] },
    ]);
  });

  it("the current pod is the newest the VMI controls", () => {
    const p = currentPod(vmi({ nodeName: undefined } as Partial<Vmi>), [
      pod({ name: "old", createdMs: 1 }),
      pod({ name: "new", createdMs: 2 }),
      pod({ name: "other", vmiUid: "x", createdMs: 3 }),
    ]);
    expect(p?.name).toBe("new");
  });
});

describe("stand-in VM steps (virt-controller's VM controller)", () => {
  it("Always: a failed VMI is deleted; with none, a new one is created", () => {
    expect(kinds(vmSteps(vm("Always"), vmi({ phase: "Failed" })))).toEqual([
      "deleteVmi",
      "status",
      "removeVmFinalizer",
    ]);
    expect(kinds(vmSteps(vm("Always"), vmi({ phase: "Failed", deleting: true })))).toEqual([
      "status",
      "removeVmFinalizer",
    ]);
    expect(kinds(vmSteps(vm("Always"), undefined))).toEqual(["createVmi", "status"]);
    expect(kinds(vmSteps(vm("Always"), vmi()))).toEqual(["status"]);
  });

  it("RerunOnFailure: a failed VMI is deleted with a start request, and the request starts the next", () => {
    const steps = vmSteps(vm("RerunOnFailure"), vmi({ phase: "Failed" }));
    // The request first: a delete whose status write then fails would leave the VM stopped.
    expect(kinds(steps)).toEqual(["status", "deleteVmi", "removeVmFinalizer"]);
    expect(steps[0]).toMatchObject({ kind: "status", startRequested: true, printableStatus: "Stopped" });
    // Its write failed: the next pass asks again, before the delete again.
    expect(kinds(vmSteps(vm("RerunOnFailure"), vmi({ phase: "Failed" })))).toEqual(kinds(steps));
    // It landed, the delete did not: the delete, the request kept.
    const after = vmSteps(vm("RerunOnFailure", { startRequested: true }), vmi({ phase: "Failed" }));
    expect(kinds(after)).toEqual(["deleteVmi", "status", "removeVmFinalizer"]);
    expect(after[1]).toMatchObject({ startRequested: true });
    const next = vmSteps(vm("RerunOnFailure", { startRequested: true }), undefined);
    expect(kinds(next)).toEqual(["createVmi", "status"]);
    expect(next[1]).toMatchObject({ startRequested: false, printableStatus: "Starting", created: true });
  });

  it("RerunOnFailure: a VMI deleted by someone else leaves the VM stopped (why release must not delete VMIs)", () => {
    const deleting = vmSteps(vm("RerunOnFailure"), vmi({ deleting: true, phase: "Failed" }));
    expect(kinds(deleting)).toEqual(["status", "removeVmFinalizer"]);
    expect(deleting[0]).toMatchObject({ startRequested: false });
    expect(vmSteps(vm("RerunOnFailure"), undefined)).toEqual([
      {
        kind: "status",
        runStrategy: "RerunOnFailure",
        startRequested: false,
        printableStatus: "Stopped",
        created: false,
        ready: false,
      },
    ]);
    // A Succeeded VMI is deleted without a start request.
    expect(vmSteps(vm("RerunOnFailure"), vmi({ phase: "Succeeded" }))[1]).toMatchObject({
      startRequested: false,
    });
  });

  it("RerunOnFailure: a new VM (status.runStrategy not yet set) starts once", () => {
    expect(
      kinds(vmSteps(vm("RerunOnFailure", { statusRunStrategy: undefined } as Partial<Vm>), undefined)),
    ).toEqual(["createVmi", "status"]);
  });

  it("never creates a VMI while one of its name exists, whatever its phase", () => {
    for (const rs of ["Always", "RerunOnFailure", "Halted"])
      for (const phase of [
        "",
        "Pending",
        "Scheduling",
        "Scheduled",
        "Running",
        "Failed",
        "Succeeded",
      ] as const)
        for (const deleting of [false, true])
          expect(kinds(vmSteps(vm(rs, { startRequested: true }), vmi({ phase, deleting })))).not.toContain(
            "createVmi",
          );
  });

  it("reports Running and ready only for a Running VMI not being deleted", () => {
    expect(vmSteps(vm("Always"), vmi())[0]).toMatchObject({ printableStatus: "Running", ready: true });
    expect(vmSteps(vm("Always"), vmi({ deleting: true }))[0]).toMatchObject({
      printableStatus: "Stopping",
      ready: false,
    });
  });
});
