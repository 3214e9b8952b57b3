// Cleanup stacks for things made of several servers: EnvScope stops what was added in
// reverse order and tries every item before it reports a failure; startAll stops the
// parts already started when a later start step throws. It never starts anything itself.
import { EnvError } from "./base.ts";

/** Something with an async stop(): a server, a group of servers, an environment. */
export interface Stoppable {
  stop(): Promise<void>;
}

/**
 * Cleanup stack for vitest hooks: `const env = new EnvScope()` in the file; in beforeAll,
 * `env.add(await startX())`; in afterAll, `await env.stopAll()`. stopAll stops in reverse
 * order and never throws before it has tried every item.
 */
export class EnvScope {
  private readonly items: Stoppable[] = [];

  add<T extends Stoppable>(item: T): T {
    this.items.push(item);
    return item;
  }

  async stopAll(): Promise<void> {
    const errors: unknown[] = [];
    while (this.items.length > 0) {
      const item = this.items.pop();
      try {
        await item?.stop();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0)
      throw new EnvError(`${errors.length} environment part(s) failed to stop`, { cause: errors[0] });
  }
}

/**
 * Start something made of several parts; if any step throws, stop the parts already
 * started (in reverse) and rethrow. `build` registers each started part with `scope.add`.
 */
export async function startAll<T>(build: (scope: EnvScope) => Promise<T>): Promise<T> {
  const scope = new EnvScope();
  try {
    return await build(scope);
  } catch (err) {
    await scope.stopAll().catch(() => undefined);
    throw err;
  }
}
