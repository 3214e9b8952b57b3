// CLI: builds the Kafka broker class-data-sharing archive used by harness/env/kafka-jvm.ts
// (`node harness/env/kafka-cds.ts`; a no-op when it exists). Must do nothing else.
import { buildKafkaCds } from "./kafka.ts";

const t0 = Date.now();
const path = await buildKafkaCds();
process.stdout.write(`kafka CDS archive: ${path} (${Date.now() - t0} ms)\n`);
process.exit(0);
