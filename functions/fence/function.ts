// Wiring of the fence function: its pure stage run by the generic stage executor, with
// the BMC power executor and the follow-up decision on the power-off result. S6: the
// identities allowed to have confirmed an incident come from configuration, never from
// the event. With fencing.discovery "Metal3", the node's BareMetalHost is read here and
// its level handed to the pure stage (which decides whether to use it). No decisions
// here; never add any.
import { KubeMetal3Api } from "../../infra/bmc/metal3.ts";
import { discoveryInput } from "../../infra/bmc/discovery-input.ts";
import { stageFunction, type FunctionDefinition } from "../contract.ts";
import { stageHandler } from "../../infra/runtime/stage-executor.ts";
import type { RuntimeDeps } from "../registry.ts";
import { onPowerOffResult, stage } from "./handler.ts";

export const definition: FunctionDefinition<RuntimeDeps> = stageFunction(stage, (deps: RuntimeDeps) => {
  const metal3 = deps.adapters.metal3 ?? new KubeMetal3Api(deps.adapters.kube);
  return stageHandler(stage, deps.adapters, deps.self, {
    extraInput: async ({ view }) => ({
      trustedConfirmers: deps.trustedConfirmers,
      ...(await discoveryInput(metal3, view)),
    }),
    onPowerOffResult,
  });
});
