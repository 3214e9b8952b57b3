// Test projects: "unit" (pure code, no servers, < 1 min), "examples" (each example under
// examples/ runs its own tests, through its runtime: `make test-unit` runs it after "unit",
// so its compiles and child processes never slow the pure tests) and the integration lanes
// "integration", "integration-heavy", "integration-lab" (real kube-apiserver, etcd, Kafka,
// BMC emulators started by harness/env; `--project 'integration*'` takes all). Examples and
// integration tests run one file at a time per lane (harness/test-lanes.ts: `make
// test-integration` runs a heavy lane, labs included, beside a light lane). Shared
// environments (one bare kube-apiserver, one Kafka) are reset after each file that uses them.
// Every run also records each file's wall time and test cases, and the integration files'
// environment starts (harness/test-times/): `make test` prints the table at its end.
import { defineConfig } from "vitest/config";
import type { ProjectConfig } from "vitest/node";
import TestTimesReporter from "./harness/test-times/reporter.ts";
import { GROUPS, INTEGRATION_GLOB, namedFiles, type SharedEnv } from "./harness/test-lanes.ts";

/** The vitest globalSetup that starts each shared environment for one invocation. */
const GLOBAL_SETUP: Record<SharedEnv, string> = {
  kafka: "harness/env/kafka-global-setup.ts",
  "control-plane": "harness/env/control-plane-global-setup.ts",
};

/** What every integration lane shares: one file at a time, each in its own process. */
const integration = {
  testTimeout: 180_000,
  hookTimeout: 180_000,
  fileParallelism: false,
  pool: "forks" as const,
  setupFiles: ["harness/test-times/current-file.ts"],
} satisfies ProjectConfig;

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
      ...GROUPS.map((group) => ({
        test: {
          name: group.project,
          include: group.files ? Object.keys(group.files) : [INTEGRATION_GLOB],
          exclude: group.files ? [] : namedFiles(),
          ...integration,
          // The environments its files share, each reset between files (harness/env/shared-*.ts).
          globalSetup: group.shared.map((env) => GLOBAL_SETUP[env]),
        },
      })),
    ],
  },
});
