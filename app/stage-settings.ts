// What a hosted stage runs with, as app/host.ts logs it once at start ("stage: effective
// settings"): pure, from the stage's name, its mode and its RuntimeConfig. Never includes a
// secret or a credential path's contents.
import type { RuntimeConfig } from "../infra/config.ts";

export interface StageSettings {
  stage: string;
  mode: "kafka" | "http";
  node: string;
  replica: string;
  namespace: string;
  policy: string;
  kubeTimeoutMs: number;
  kafkaClient: RuntimeConfig["FASTFENCE_KAFKA_CLIENT"];
}

export function stageSettings(name: string, mode: object, config: RuntimeConfig): StageSettings {
  return {
    stage: name,
    mode: "kafka" in mode ? "kafka" : "http",
    node: config.FASTFENCE_NODE_NAME ?? "none",
    replica: config.FASTFENCE_REPLICA,
    namespace: config.FASTFENCE_NAMESPACE,
    policy: config.FASTFENCE_POLICY,
    kubeTimeoutMs: config.FASTFENCE_KUBE_TIMEOUT_MS,
    kafkaClient: config.FASTFENCE_KAFKA_CLIENT,
  };
}
