// A vitest setup file (integration project): tells the harness which test file runs in
// this process, so the environment starts it times (harness/env/start-times.ts) are
// charged to that file in the test-time report; child processes inherit it. Test
// processes only (it imports vitest). It sets one environment variable and must never
// start, wait on or change anything else.
import { beforeAll } from "vitest";
import { TEST_FILE_VAR } from "../env/start-times.ts";

// vitest reads a hook's first parameter as its fixtures, so it must be a destructuring pattern.
// eslint-disable-next-line no-empty-pattern -- no fixture is wanted, only the suite
beforeAll(({}, suite) => {
  process.env[TEST_FILE_VAR] = suite.file.filepath;
});
