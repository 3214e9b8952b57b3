// The list of pipeline stages. Adding a stage = a new folder functions/<name>/ with
// handler.ts (exports `stage`) and decide.pure.ts, one line here, and the registrations
// docs/adding-a-function.md lists (test/unit/functions/registrations.test.ts checks them).
// Declarations only: no I/O at import time, and nothing here imports infra/ or app/.
import type { PureStage } from "./contract.ts";
import { stage as confirm } from "./confirm/handler.ts";
import { stage as detect } from "./detect/handler.ts";
import { stage as fence } from "./fence/handler.ts";
import { stage as recover } from "./recover/handler.ts";
import { stage as remediateWorkloads } from "./remediate-workloads/handler.ts";

export const STAGES: readonly PureStage[] = [detect, confirm, fence, remediateWorkloads, recover];

export function findStage(name: string): PureStage | undefined {
  return STAGES.find((f) => f.name === name);
}

export function stageNames(): string[] {
  return STAGES.map((f) => f.name);
}
