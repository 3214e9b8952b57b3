import { describe, expect, it } from "vitest";
import { WaitAbandoned, waitUntil } from "../../../harness/env/wait.ts";

describe("waitUntil", () => {
  it("returns the first value that is not undefined or false", async () => {
    let n = 0;
    await expect(waitUntil("three calls", async () => (++n >= 3 ? n : false), 1000, 1)).resolves.toBe(3);
  });

  it("names what it waited for and the last error on timeout", async () => {
    await expect(
      waitUntil(
        "the moon",
        async () => {
          throw new Error("still dark");
        },
        20,
        5,
        "lab: ",
      ),
    ).rejects.toThrow("lab: timed out after 20 ms waiting for the moon (last error: Error: still dark)");
  });

  it("gives up at once when the condition throws WaitAbandoned", async () => {
    let calls = 0;
    const t0 = Date.now();
    await expect(
      waitUntil(
        "agents",
        async () => {
          calls++;
          throw new WaitAbandoned("agent of node-a failed at creating ACLs: boom");
        },
        10_000,
        5,
        "lab: ",
      ),
    ).rejects.toThrow("lab: gave up waiting for agents: agent of node-a failed at creating ACLs: boom");
    expect(calls).toBe(1);
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});
