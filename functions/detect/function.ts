// Wiring of the detect function: its pure stage (handler.ts) run by the generic stage
// executor with the Kubernetes adapters. No decisions here; never add any.
import { stageFunction, type FunctionDefinition } from "../contract.ts";
import { stageHandler } from "../../infra/runtime/stage-executor.ts";
import type { RuntimeDeps } from "../registry.ts";
import { stage } from "./handler.ts";

export const definition: FunctionDefinition<RuntimeDeps> = stageFunction(stage, (deps: RuntimeDeps) =>
  stageHandler(stage, deps.adapters, deps.self),
);
