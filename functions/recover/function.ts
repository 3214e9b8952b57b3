// Wiring of the recover function: its pure stage (handler.ts) run by the generic stage
// executor with the Kubernetes adapters. For a power-on (workloads.released with
// powerOnAfterFence) under fencing.discovery "Metal3", the node's BareMetalHost level is
// read here and handed to the pure stage. No decisions here; never add any.
import { KubeMetal3Api } from "../../infra/bmc/metal3.ts";
import { discoveryInput } from "../../infra/bmc/discovery-input.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import { stageFunction, type FunctionDefinition } from "../contract.ts";
import { stageHandler } from "../../infra/runtime/stage-executor.ts";
import type { RuntimeDeps } from "../registry.ts";
import { stage } from "./handler.ts";

export const definition: FunctionDefinition<RuntimeDeps> = stageFunction(stage, (deps: RuntimeDeps) => {
  const metal3 = deps.adapters.metal3 ?? new KubeMetal3Api(deps.adapters.kube);
  return stageHandler(stage, deps.adapters, deps.self, {
    extraInput: async ({ event, view }) =>
      event.type === EVENT_TYPES.workloadsReleased && view.policy.powerOnAfterFence
        ? discoveryInput(metal3, view)
        : {},
  });
});
