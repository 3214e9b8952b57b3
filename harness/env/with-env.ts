// The vitest hook of the harness: withEnv starts an environment once per test file
// (beforeAll) and stops everything it started afterwards (afterAll), also when a later
// start step or a test fails. Test files only: it imports vitest, so the lab, the
// benches and the CLI must never import it.
import { afterAll, beforeAll } from "vitest";
import { EnvError } from "./base.ts";
import { EnvScope } from "./scope.ts";

/**
 * Start an environment once per test file and stop it afterwards, even when a later
 * start step or a test fails:
 *
 *   const env = withEnv(async (scope) => {
 *     const cp = scope.add(await startControlPlane({ scheduler: true }));
 *     const kafka = scope.add(await startKafka());
 *     return { cp, kafka };
 *   });
 *   it("...", () => { env().cp.kubeConfig ... });
 *
 * Each part is added to the scope as soon as it is up, so a failure in a later step
 * stops the earlier ones (in reverse order) before the error reaches vitest.
 */
export function withEnv<T>(start: (scope: EnvScope) => Promise<T>): () => T {
  const scope = new EnvScope();
  let value: T | undefined;
  let started = false;
  beforeAll(async () => {
    try {
      value = await start(scope);
      started = true;
    } catch (err) {
      await scope.stopAll().catch(() => undefined);
      throw err;
    }
  });
  afterAll(async () => {
    await scope.stopAll();
  });
  return () => {
    if (!started) throw new EnvError("environment not started (did beforeAll fail?)");
    return value as T;
  };
}
