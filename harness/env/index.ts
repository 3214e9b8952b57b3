// The harness's real servers in one import: managed processes and the run registry,
// loopback ports, a Kubernetes control plane, kwok nodes, Kafka brokers, cleanup scopes
// and waiting. For the tests, the lab, the benches and `fastfence stack-check`; the vitest
// hook withEnv is in with-env.ts. Re-exports only; it must never start anything itself.
export * from "./base.ts";
export * from "./registry.ts";
export * from "./ports.ts";
export * from "./process.ts";
export * from "./scope.ts";
export * from "./wait.ts";
export * from "./controlplane.ts";
export * from "./kwok.ts";
export * from "./kafka-jvm.ts";
export * from "./kafka.ts";
export * from "./kafka-auth.ts";
