// Wiring of the fence function: its pure stage run by the generic stage executor, with
// the BMC power executor and the follow-up decision on the power-off result. S6: the
// identities allowed to have confirmed an incident come from configuration, never from
// the event. No decisions here; never add any.
import type { FunctionDefinition } from "../contract.ts";
import { stageHandler } from "../../infra/runtime/stage-executor.ts";
import type { RuntimeDeps } from "../registry.ts";
import { onPowerOffResult, stage } from "./handler.ts";

export const definition: FunctionDefinition<RuntimeDeps> = {
  name: stage.name,
  description: stage.description,
  subscriptions: stage.subscriptions,
  emits: stage.emits,
  critical: stage.critical,
  create: (deps) =>
    stageHandler(stage, deps.adapters, deps.self, {
      extraInput: () => ({ trustedConfirmers: deps.trustedConfirmers }),
      onPowerOffResult,
    }),
};
