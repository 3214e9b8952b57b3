// Three test projects: "unit" (pure code, no servers, < 1 min), "examples" (each example
// under examples/ runs its own tests, through its runtime: `make test-unit` runs it after
// "unit", so its compiles and child processes never slow the pure tests) and "integration"
// (real kube-apiserver, etcd, Kafka, BMC emulators started by harness/env; one bare
// kube-apiserver is shared by the files that need no more, reset after each). Examples and
// integration tests run one file at a time: the machine has 2 cores and the servers are heavy.
// Every run also records each file's wall time and test cases, and the integration files'
// environment starts (harness/test-times/): `make test` prints the table at its end.
import { defineConfig } from "vitest/config";
import TestTimesReporter from "./harness/test-times/reporter.ts";

export default defineConfig({
  test: {
    reporters: ["default", new TestTimesReporter()],
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
          name: "examples",
          include: ["test/examples/**/*.test.ts"],
          testTimeout: 240_000,
          hookTimeout: 300_000,
          fileParallelism: false,
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
          setupFiles: ["harness/test-times/current-file.ts"],
          // One bare kube-apiserver for the files that need no more (sharedControlPlane()).
          globalSetup: ["harness/env/global-setup.ts"],
        },
      },
    ],
  },
});
