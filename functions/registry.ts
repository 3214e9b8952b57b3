// The list of pipeline functions, and what every function's wiring receives. Adding a
// function = a new folder with handler.ts (pure stage), function.ts (wiring) and one line
// here (see docs/adding-a-function.md). Declarations only; no I/O at import time.
import type { Self } from "../core/decision.ts";
import type { StageAdapters } from "../infra/runtime/stage-executor.ts";
import type { FunctionDefinition } from "./contract.ts";
import { definition as confirm } from "./confirm/function.ts";
import { definition as detect } from "./detect/function.ts";
import { definition as fence } from "./fence/function.ts";
import { definition as recover } from "./recover/function.ts";
import { definition as remediateWorkloads } from "./remediate-workloads/function.ts";

export interface RuntimeDeps {
  adapters: StageAdapters;
  self: Self;
  /** Identities (service-account user names) whose Confirmed incidents fence may act on (S6). */
  trustedConfirmers: readonly string[];
}

export const FUNCTIONS: readonly FunctionDefinition<RuntimeDeps>[] = [
  detect,
  confirm,
  fence,
  remediateWorkloads,
  recover,
];

export function findFunction(name: string): FunctionDefinition<RuntimeDeps> | undefined {
  return FUNCTIONS.find((f) => f.name === name);
}
