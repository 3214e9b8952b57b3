// The VM controller stand-in's decisions, pure: what KubeVirt's virt-controller does on the
// path from a VM to its running VMI and back after a node is lost (read in kubevirt/kubevirt:
// watch/vm/vm.go syncRunStrategy, startVMI, stopVMI, updateStatus; watch/vmi/lifecycle.go
// sync, updateStatus; pkg/controller/controller.go CurrentVMIPod; docs/safety.md sums it up).
// Only runStrategy Always, RerunOnFailure and Halted; no migrations, DataVolumes, hotplug.
// kwok plays virt-handler: a Scheduled VMI whose launcher pod runs on a Ready node is Running.
// Harness only, never the product. No I/O (vm-controller.ts reads and writes).

/** The VM controller's finalizer on the VMIs it creates. */
export const VM_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize";
/** The finalizer virt-api's mutating webhook puts on every VMI; the VMI controller removes it. */
export const VMI_FINALIZER = "kubevirt.io/foregroundDeleteVirtualMachine";

export type Phase = "" | "Pending" | "Scheduling" | "Scheduled" | "Running" | "Succeeded" | "Failed";
export const isFinal = (p: Phase) => p === "Succeeded" || p === "Failed";

export interface Vm {
  namespace: string;
  name: string;
  uid: string;
  runStrategy: string;
  /** status.runStrategy: the strategy the controller last acted on. */
  statusRunStrategy?: string;
  /** status.stateChangeRequests holds a Start. */
  startRequested: boolean;
}

export interface Vmi {
  namespace: string;
  name: string;
  uid: string;
  phase: Phase;
  deleting: boolean;
  finalizers: string[];
  nodeName?: string;
}

export interface LauncherPod {
  name: string;
  /** uid of the VMI its controller reference names. */
  vmiUid: string;
  nodeName?: string;
  phase: string;
  ready: boolean;
  deleting: boolean;
  createdMs: number;
}

export type VmStep =
  | { kind: "deleteVmi" }
  | { kind: "createVmi" }
  | { kind: "removeVmFinalizer" }
  | {
      kind: "status";
      runStrategy: string;
      startRequested: boolean;
      printableStatus: string;
      created: boolean;
      ready: boolean;
    };

/**
 * One VM's steps on the VMI of its name (undefined: none exists). Writes in order: the
 * VMI delete or create, the VM status, then the finalizer (KubeVirt removes it after it
 * recorded the final VMI on the VM) — except a new start request, written before the
 * delete. Never creates a VMI while one of that name exists.
 */
export function vmSteps(vm: Vm, vmi: Vmi | undefined): VmStep[] {
  const steps: VmStep[] = [];
  let startRequested = vm.startRequested;
  let created = vmi !== undefined;
  const live = vmi && !vmi.deleting;
  switch (vm.runStrategy) {
    case "Always":
      if (live && isFinal(vmi.phase)) steps.push({ kind: "deleteVmi" });
      if (!vmi) {
        steps.push({ kind: "createVmi" });
        created = true;
      }
      break;
    case "RerunOnFailure":
      if (live && isFinal(vmi.phase)) {
        steps.push({ kind: "deleteVmi" });
        // Only a failure asks for a new start; a VMI deleted by anyone else does not.
        if (vmi.phase === "Failed") startRequested = true;
      }
      if (!vmi && (startRequested || vm.statusRunStrategy !== vm.runStrategy)) {
        steps.push({ kind: "createVmi" });
        startRequested = false;
        created = true;
      }
      break;
    case "Halted":
      if (live) steps.push({ kind: "deleteVmi" });
      break;
    default:
      break; // Manual, Once, WaitAsReceiver: not modelled
  }
  const running = vmi?.phase === "Running" && !vmi.deleting;
  const status: VmStep = {
    kind: "status",
    runStrategy: vm.runStrategy,
    startRequested,
    printableStatus: printable(vmi, created),
    created,
    ready: running,
  };
  // A new start request is written before the delete it answers, so a write that fails
  // never leaves the VMI deleted without it. KubeVirt deletes first (docs/lab.md).
  if (startRequested && !vm.startRequested && steps[0]?.kind === "deleteVmi") steps.unshift(status);
  else steps.push(status);
  if (vmi && isFinal(vmi.phase) && vmi.finalizers.includes(VM_FINALIZER))
    steps.push({ kind: "removeVmFinalizer" });
  return steps;
}

function printable(vmi: Vmi | undefined, created: boolean): string {
  if (!vmi) return created ? "Starting" : "Stopped";
  if (vmi.deleting) return "Stopping";
  if (vmi.phase === "Running") return "Running";
  return isFinal(vmi.phase) ? "Stopped" : "Starting";
}

export type VmiStep =
  | { kind: "createPod" }
  | { kind: "deletePods"; names: string[] }
  | { kind: "phase"; phase: Phase; nodeName?: string }
  | { kind: "removeFinalizers"; finalizers: string[] };

/** KubeVirt's current pod: the newest the VMI controls on the VMI's node (any node before it has one). */
export function currentPod(vmi: Vmi, pods: readonly LauncherPod[]): LauncherPod | undefined {
  return pods
    .filter((p) => p.vmiUid === vmi.uid && (!vmi.nodeName || p.nodeName === vmi.nodeName))
    .sort((a, b) => b.createdMs - a.createdMs)[0];
}

const down = (p: LauncherPod) => p.phase === "Succeeded" || p.phase === "Failed";

/**
 * One VMI's steps given the launcher pods (all of them: those it controls are picked by
 * uid), the Ready nodes, and whether its VM still exists.
 */
export function vmiSteps(
  vmi: Vmi,
  pods: readonly LauncherPod[],
  readyNodes: ReadonlySet<string>,
  vmExists: boolean,
): VmiStep[] {
  const owned = pods.filter((p) => p.vmiUid === vmi.uid);
  const pod = currentPod(vmi, pods);
  const steps: VmiStep[] = [];
  if (vmi.deleting) {
    const names = owned.filter((p) => !p.deleting).map((p) => p.name);
    if (names.length) steps.push({ kind: "deletePods", names });
  }
  const to = (phase: Phase, nodeName?: string) => {
    if (phase !== vmi.phase || (nodeName && nodeName !== vmi.nodeName))
      steps.push({ kind: "phase", phase, ...(nodeName ? { nodeName } : {}) });
  };
  switch (vmi.phase) {
    case "":
    case "Pending":
      if (pod) to("Scheduling");
      else if (vmi.deleting) to("Failed");
      else {
        steps.push({ kind: "createPod" });
        to("Pending");
      }
      break;
    case "Scheduling":
      if (!pod) to("Failed");
      else if (pod.ready && pod.nodeName && !vmi.deleting) to("Scheduled", pod.nodeName);
      else if (down(pod) || pod.deleting) to("Failed");
      break;
    case "Scheduled":
      if (!pod) to("Failed");
      // virt-handler's part, played by kwok: the launcher runs on a Ready node.
      else if (pod.phase === "Running" && pod.nodeName && readyNodes.has(pod.nodeName)) to("Running");
      break;
    case "Running":
      if (!pod) to("Failed");
      break;
    case "Succeeded":
    case "Failed": {
      const drop: string[] = [];
      if (owned.length === 0 && vmi.finalizers.includes(VMI_FINALIZER)) drop.push(VMI_FINALIZER);
      if (!vmExists && vmi.finalizers.includes(VM_FINALIZER)) drop.push(VM_FINALIZER);
      if (drop.length) steps.push({ kind: "removeFinalizers", finalizers: drop });
      break;
    }
  }
  return steps;
}
