// IPMI RMCP+ codecs against the recorded wire bytes of a real ipmi_sim session
// (fixtures/ipmi-session-cs3.json, made by harness/env/bmc-record-ipmi.ts): every request we
// sent re-encodes byte for byte, every reply decodes, the RAKP codes verify, and the
// session keys authenticate and decrypt the recorded traffic.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import * as chassisControl from "../../../infra/bmc/ipmi/messages/chassisControl/index.ts";
import * as chassisStatus from "../../../infra/bmc/ipmi/messages/getChassisStatus/index.ts";
import * as closeSession from "../../../infra/bmc/ipmi/messages/closeSession/index.ts";
import * as gcac from "../../../infra/bmc/ipmi/messages/getChannelAuthCapabilities/index.ts";
import * as openSession from "../../../infra/bmc/ipmi/messages/openSession/index.ts";
import * as rakp from "../../../infra/bmc/ipmi/messages/rakp/index.ts";
import * as setPriv from "../../../infra/bmc/ipmi/messages/setSessionPrivilege/index.ts";
import {
  CIPHER_SUITES,
  decodeIpmiRequest,
  decodeIpmiResponse,
  decodeV15,
  decodeV20,
  decryptPayload,
  encodeIpmiRequest,
  encodeV15,
  encodeV20,
  encryptPayload,
  IpmiWireError,
  PayloadType,
} from "../../../infra/bmc/ipmi/wire.ts";

const fx = JSON.parse(
  readFileSync(path.join(import.meta.dirname, "fixtures/ipmi-session-cs3.json"), "utf8"),
) as {
  username: string;
  password: string;
  packets: { dir: "tx" | "rx"; hex: string }[];
};
const pk = fx.packets.map((p) => ({ dir: p.dir, b: Buffer.from(p.hex, "hex") }));
const suite = CIPHER_SUITES[3];

// packet order: gcac tx/rx, open session tx/rx, rakp1/2, rakp3/4, then session traffic
const [gcacTx, gcacRx, osTx, osRx, r1Tx, r2Rx, r3Tx, r4Rx] = pk.map((p) => p.b) as Buffer[];

function handshake(password = fx.password) {
  const os = openSession.decode(decodeV20(osRx!).payload);
  const r1 = decodeV20(r1Tx!).payload;
  const r2 = rakp.decodeRakp2(decodeV20(r2Rx!).payload);
  const h: rakp.Handshake = {
    consoleSessionId: os.consoleSessionId,
    managedSessionId: os.managedSessionId,
    rm: r1.subarray(8, 24),
    rc: r2.rc,
    guid: r2.guid,
    role: r1[24]!,
    username: Buffer.from(fx.username),
  };
  return { os, r2, h, key: rakp.kuid(password) };
}

describe("IPMI wire codecs (recorded ipmi_sim session, cipher suite 3)", () => {
  it("Get Channel Authentication Capabilities: request bytes and reply", () => {
    const req = decodeIpmiRequest(decodeV15(gcacTx!));
    expect(req).toMatchObject({ netFn: gcac.NETFN, cmd: gcac.CMD });
    expect(encodeV15(encodeIpmiRequest({ ...req, data: gcac.encode(4) }))).toEqual(gcacTx);
    const res = decodeIpmiResponse(decodeV15(gcacRx!));
    expect(res.completionCode).toBe(0);
    expect(gcac.decode(res.data).supportsRmcpPlus).toBe(true);
  });

  it("Open Session: request re-encodes byte for byte; response names cipher suite 3", () => {
    const sent = decodeV20(osTx!);
    expect(sent.payloadType).toBe(PayloadType.OPEN_SESSION_REQUEST);
    const consoleSessionId = sent.payload.readUInt32LE(4);
    const again = encodeV20({
      payloadType: PayloadType.OPEN_SESSION_REQUEST,
      sessionId: 0,
      sessionSeq: 0,
      payload: openSession.encode({ tag: sent.payload[0]!, privilege: 4, consoleSessionId, suite }),
    });
    expect(again).toEqual(osTx);
    const r = openSession.decode(decodeV20(osRx!).payload);
    expect(r).toMatchObject({
      status: 0,
      consoleSessionId,
      authAlg: 1,
      integrityAlg: 1,
      confidentialityAlg: 1,
    });
  });

  it("RAKP 1-4: RAKP1 and RAKP3 re-encode; RAKP2 and RAKP4 verify only with the right password", () => {
    const { os, r2, h, key } = handshake();
    const r1 = decodeV20(r1Tx!).payload;
    expect(
      encodeV20({
        payloadType: PayloadType.RAKP1,
        sessionId: 0,
        sessionSeq: 0,
        payload: rakp.encodeRakp1({
          tag: r1[0]!,
          managedSessionId: os.managedSessionId,
          rm: h.rm,
          role: h.role,
          username: h.username,
        }),
      }),
    ).toEqual(r1Tx);
    expect(r2.status).toBe(0);
    expect(rakp.verifyRakp2(suite, key, h, r2.authCode)).toBe(true);
    expect(rakp.verifyRakp2(suite, rakp.kuid("wrong-password"), h, r2.authCode)).toBe(false);

    const r3 = decodeV20(r3Tx!).payload;
    expect(
      encodeV20({
        payloadType: PayloadType.RAKP3,
        sessionId: 0,
        sessionSeq: 0,
        payload: rakp.encodeRakp3({
          tag: r3[0]!,
          status: 0,
          managedSessionId: os.managedSessionId,
          authCode: rakp.rakp3AuthCode(suite, key, h),
        }),
      }),
    ).toEqual(r3Tx);
    const r4 = rakp.decodeRakp4(decodeV20(r4Rx!).payload);
    const sik = rakp.sik(suite, key, h);
    expect(rakp.verifyRakp4(suite, sik, h, r4.icv)).toBe(true);
  });

  it("session traffic: integrity verifies, payloads decrypt, requests re-encode with the recorded IV", () => {
    const { h, key } = handshake();
    const keys = rakp.sessionKeys(suite, rakp.sik(suite, key, h));
    const cmds: string[] = [];
    let powerOn: boolean | undefined;
    for (const { dir, b } of pk.slice(8)) {
      const p = decodeV20(b, keys);
      expect(p.authenticated && p.encrypted).toBe(true);
      if (dir === "tx") {
        expect(p.sessionId).toBe(h.managedSessionId);
        const req = decodeIpmiRequest(p.payload);
        cmds.push(`${req.netFn}/${req.cmd}`);
        const iv = b.subarray(16, 32);
        expect(
          encodeV20(
            {
              payloadType: PayloadType.IPMI,
              sessionId: p.sessionId,
              sessionSeq: p.sessionSeq,
              payload: p.payload,
            },
            keys,
            iv,
          ),
        ).toEqual(b);
        if (req.cmd === chassisControl.CMD && req.netFn === chassisControl.NETFN)
          expect(req.data).toEqual(chassisControl.encode(0));
        if (req.cmd === closeSession.CMD) expect(req.data).toEqual(closeSession.encode(h.managedSessionId));
      } else {
        expect(p.sessionId).toBe(h.consoleSessionId);
        const res = decodeIpmiResponse(p.payload);
        expect(res.completionCode).toBe(0);
        if (res.netFn === chassisStatus.NETFN + 1 && res.cmd === chassisStatus.CMD)
          powerOn = chassisStatus.decode(res.data).powerOn;
      }
    }
    expect(cmds).toEqual([
      `${setPriv.NETFN}/${setPriv.CMD}`,
      `${chassisStatus.NETFN}/${chassisStatus.CMD}`,
      `${chassisControl.NETFN}/${chassisControl.CMD}`,
      `${closeSession.NETFN}/${closeSession.CMD}`,
    ]);
    expect(powerOn).toBe(true);
  });

  it("a tampered packet fails the integrity check", () => {
    const { h, key } = handshake();
    const keys = rakp.sessionKeys(suite, rakp.sik(suite, key, h));
    const b = Buffer.from(pk[9]!.b);
    b[20] = b[20]! ^ 0x01;
    expect(() => decodeV20(b, keys)).toThrow(IpmiWireError);
  });
});

describe("IPMI codec properties", () => {
  it("message checksums: corrupting any byte is detected", () => {
    const m = encodeIpmiRequest({ netFn: 0, cmd: 1, rqSeq: 5, data: Buffer.from([1, 2, 3]) });
    expect(decodeIpmiRequest(m)).toMatchObject({ netFn: 0, cmd: 1, rqSeq: 5 });
    for (let i = 0; i < m.length; i++) {
      const c = Buffer.from(m);
      c[i] = c[i]! ^ 0x10;
      expect(() => decodeIpmiRequest(c)).toThrow();
    }
  });

  it("AES-CBC-128 confidentiality pad round-trips for every length", () => {
    const k2 = Buffer.alloc(20, 7);
    for (let n = 0; n < 40; n++) {
      const d = Buffer.alloc(n, 0xab);
      const e = encryptPayload(k2, d);
      expect((e.length - 16) % 16).toBe(0);
      expect(decryptPayload(k2, e)).toEqual(d);
    }
  });

  it("cipher suite 17 (HMAC-SHA256, HMAC-SHA256-128): packets round-trip with 16-byte auth codes", () => {
    const s17 = CIPHER_SUITES[17];
    const keys = rakp.sessionKeys(s17, Buffer.alloc(32, 9));
    expect(keys.k1.length).toBe(32);
    const payload = encodeIpmiRequest({ netFn: 0, cmd: 1, rqSeq: 1, data: Buffer.alloc(0) });
    const pkt = encodeV20({ payloadType: 0, sessionId: 7, sessionSeq: 3, payload }, keys);
    expect((pkt.length - 4 - 16) % 4).toBe(0);
    expect(decodeV20(pkt, keys).payload).toEqual(payload);
    const open = openSession.encode({ tag: 1, privilege: 4, consoleSessionId: 1, suite: s17 });
    expect([open[12], open[20], open[28]]).toEqual([3, 4, 1]);
  });
});
