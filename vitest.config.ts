// Two test projects: "unit" (pure code, no servers, < 1 min) and "integration" (real
// kube-apiserver, etcd, Kafka, BMC emulators started by harness/env). Integration tests
// run one file at a time: the machine has 2 cores and the servers are heavy.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          pool: "forks",
        },
      },
    ],
  },
});
