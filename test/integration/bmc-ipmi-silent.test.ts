// Needs real UDP sockets on loopback: a silent BMC, timed by the IPMI driver's socket timers.
// An IPMI BMC that answers nothing at all (it lost power with its node, or its network is
// cut) is known as unreachable after the driver's noReplyMs, not after the caller's whole
// budget, so a fencing round moves on to its next level (the watchdog level for a node that
// lost power) in about 2 s instead of the level's budget (issue 18's power-loss bound).
// Real UDP sockets on loopback: a "BMC" that swallows every datagram, and one that sends
// back only garbage (it is alive; only the caller's deadline ends the wait).
import dgram from "node:dgram";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BmcError, powerOffAndConfirm } from "../../infra/bmc/driver.ts";
import { IpmiDriver, NO_REPLY_MS } from "../../infra/bmc/ipmi/driver.ts";

const sockets: dgram.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
});

/** A UDP endpoint on loopback that receives every datagram and answers per `reply`. */
async function fakeBmc(
  reply: (from: dgram.RemoteInfo, sock: dgram.Socket) => void,
): Promise<{ port: number; received: () => number }> {
  const sock = dgram.createSocket("udp4");
  sockets.push(sock);
  let n = 0;
  sock.on("message", (_pkt, from) => {
    n++;
    reply(from, sock);
  });
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", r));
  return { port: (sock.address() as AddressInfo).port, received: () => n };
}

const driver = (port: number, noReplyMs?: number) =>
  new IpmiDriver({
    host: "127.0.0.1",
    port,
    username: "fence",
    password: "pw",
    ...(noReplyMs !== undefined ? { noReplyMs } : {}),
  });

async function failure(p: Promise<unknown>): Promise<{ err: BmcError; ms: number }> {
  const t0 = Date.now();
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BmcError);
  return { err: err as BmcError, ms: Date.now() - t0 };
}

describe("IPMI driver, a BMC that answers nothing", () => {
  it(`is unreachable after noReplyMs (default ${NO_REPLY_MS} ms), not after the caller's 10 s`, async () => {
    const bmc = await fakeBmc(() => undefined);
    const d = driver(bmc.port);
    const { err, ms } = await failure(d.status({ timeoutMs: 10_000 }));
    await d.close();
    expect(err.code).toBe("FF_BMC_UNREACHABLE");
    expect(err.message).toContain(`no datagram from the BMC within ${NO_REPLY_MS} ms`);
    expect(ms).toBeGreaterThanOrEqual(NO_REPLY_MS - 50);
    expect(ms).toBeLessThan(NO_REPLY_MS + 1000);
    // it was asked, several times (retransmits), before the driver gave up
    expect(bmc.received()).toBeGreaterThanOrEqual(3);
  });

  it("ends a power-off level at once as unreachable, without waiting the level's budget for the off command", async () => {
    const bmc = await fakeBmc(() => undefined);
    const d = driver(bmc.port, 1000);
    let lastLook = 0;
    const { err, ms } = await failure(
      powerOffAndConfirm(d, {
        timeoutMs: 10_000,
        pollMs: 200,
        now: Date.now,
        beforeOff: async () => {
          lastLook++;
        },
      }),
    );
    await d.close();
    expect(err.code).toBe("FF_BMC_UNREACHABLE");
    expect(ms).toBeLessThan(2000);
    // the session never opened, so no off command could have been sent
    expect(lastLook).toBe(0);
  });
});

describe("IPMI driver, a BMC that answers only garbage", () => {
  it("is waited for until the caller's deadline: noReplyMs covers total silence only", async () => {
    const bmc = await fakeBmc((from, sock) => sock.send(Buffer.from("not ipmi"), from.port, from.address));
    const d = driver(bmc.port, 500);
    const { err, ms } = await failure(d.status({ timeoutMs: 2500 }));
    await d.close();
    expect(err.code).toBe("FF_BMC_UNREACHABLE");
    expect(err.message).toContain("no reply to get chassis status within 2500 ms");
    expect(ms).toBeGreaterThanOrEqual(2450);
  });
});
