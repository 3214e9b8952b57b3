// Wiring of the remediate-workloads function: its pure stage run by the generic stage
// executor, with the follow-up decision once the node's workloads are released. No
// decisions here; never add any.
import { stageFunction, type FunctionDefinition } from "../contract.ts";
import { stageHandler } from "../../infra/runtime/stage-executor.ts";
import type { RuntimeDeps } from "../registry.ts";
import { onReleased, stage } from "./handler.ts";

export const definition: FunctionDefinition<RuntimeDeps> = stageFunction(stage, (deps: RuntimeDeps) =>
  stageHandler(stage, deps.adapters, deps.self, { onReleased }),
);
