// What code outside the product (the test harness, the lab, the benches) may start or call:
// the composition roots of the stage host and the event source, and the few product
// functions those callers need to build their inputs. The harness and the lab import this
// module from the unpacked artifact (harness/shipped-app.ts), so they run what ships. It
// declares only: importing it starts nothing.
export { hostFunction, kafkaBusSettings, pipelineTopics, type HostedFunction } from "./host.ts";
export {
  eventSourceSettings,
  hostEventSource,
  sourceClientId,
  type EventSourceSettings,
  type HostedEventSource,
} from "./source.ts";
export { operatorFence } from "./operator.ts";
export { loadRuntimeConfig, type RuntimeConfig } from "../infra/config.ts";
export { createKafkaBus } from "../infra/bus/kafka-bus.ts";
export { createLogger } from "../infra/log.ts";
export { stageNames } from "../functions/registry.ts";
