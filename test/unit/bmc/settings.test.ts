// BMC address parsing (metal3 BareMetalHost forms), metal3 node ↔ host mapping and the
// reboot annotation, fence-agent stdin building.
import { describe, expect, it } from "vitest";
import { FastfenceError } from "../../../core/errors.ts";
import { agentStdin, scrub } from "../../../infra/bmc/fence-agent.ts";
import {
  holdPoweredOffPatch,
  hostFromAnnotation,
  rebootAnnotationKey,
  releasePatch,
  settingsFromHost,
} from "../../../infra/bmc/metal3.ts";
import { credentialsFromSecretData } from "../../../infra/bmc/credentials.ts";
import { parseBmcAddress } from "../../../infra/bmc/settings.ts";

describe("parseBmcAddress", () => {
  it.each([
    ["ipmi://10.0.0.5", { protocol: "ipmi", host: "10.0.0.5", port: 623 }],
    ["ipmi://10.0.0.5:6230", { protocol: "ipmi", host: "10.0.0.5", port: 6230 }],
    ["10.0.0.7", { protocol: "ipmi", host: "10.0.0.7", port: 623 }],
    ["ipmi://[fd00::5]:623", { protocol: "ipmi", host: "fd00::5", port: 623 }],
    [
      "redfish://bmc.example.com/redfish/v1/Systems/1",
      { protocol: "redfish", baseUrl: "https://bmc.example.com:443", systemPath: "/redfish/v1/Systems/1" },
    ],
    [
      "redfish+http://127.0.0.1:8000/redfish/v1/Systems/abc",
      { protocol: "redfish", baseUrl: "http://127.0.0.1:8000", systemPath: "/redfish/v1/Systems/abc" },
    ],
    ["redfish+https://10.1.1.1:8443", { protocol: "redfish", baseUrl: "https://10.1.1.1:8443" }],
    [
      "idrac-redfish://10.1.1.2/redfish/v1/Systems/System.Embedded.1",
      { protocol: "redfish", vendor: "idrac", systemPath: "/redfish/v1/Systems/System.Embedded.1" },
    ],
    [
      "ilo5-redfish://10.1.1.3/redfish/v1/Systems/1",
      { protocol: "redfish", vendor: "ilo5", baseUrl: "https://10.1.1.3:443" },
    ],
    [
      "redfish-virtualmedia+http://h:81/redfish/v1/Systems/2",
      { protocol: "redfish", baseUrl: "http://h:81" },
    ],
    [
      "fence-agent://pdu1:23?agent=fence_apc&plug=3&secure=1",
      {
        protocol: "fence-agent",
        agent: "fence_apc",
        params: { plug: "3", secure: "1", ip: "pdu1", ipport: "23" },
      },
    ],
  ])("%s", (addr, want) => {
    expect(parseBmcAddress(addr)).toMatchObject(want);
  });

  it("no system path when the address stops at the service root", () => {
    expect(parseBmcAddress("redfish://h/redfish/v1/").systemPath).toBeUndefined();
  });

  it.each([
    ["", "empty"],
    ["redfish+ftp://h", "transport"],
    ["idrac://10.0.0.1", "fence_idrac"],
    ["ilo4://10.0.0.1", "fence_ilo4"],
    ["gopher://h", "unknown scheme"],
    ["ipmi://h:0", "port"],
    ["fence-agent://pdu?agent=fence_apc&password=x", "Secret"],
    ["fence-agent://pdu?agent=rm", "agent="],
  ])("rejects %s", (addr, why) => {
    let err: unknown;
    try {
      parseBmcAddress(addr);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FastfenceError);
    expect((err as FastfenceError).code).toBe("FF_INVALID_CONFIG");
    expect((err as FastfenceError).message).toContain(why);
  });

  it("refuses credentials in the address and never echoes them", () => {
    try {
      parseBmcAddress("redfish://root:hunter2@10.0.0.1/redfish/v1/Systems/1");
      expect.unreachable();
    } catch (e) {
      expect((e as FastfenceError).code).toBe("FF_INVALID_CONFIG");
      expect((e as Error).message).not.toContain("hunter2");
      expect((e as Error).message).not.toContain("root");
    }
  });

  it("credentials from Secret data", () => {
    const data = {
      username: Buffer.from("admin").toString("base64"),
      password: Buffer.from("pw").toString("base64"),
    };
    expect(credentialsFromSecretData(data, "s")).toEqual({ username: "admin", password: "pw" });
    expect(() => credentialsFromSecretData({}, "s")).toThrow(FastfenceError);
  });
});

describe("metal3 discovery", () => {
  const host = {
    metadata: { name: "worker-0", namespace: "metal3", uid: "u-123" },
    spec: {
      bmc: {
        address: "redfish+https://10.0.0.9/redfish/v1/Systems/1",
        credentialsName: "worker-0-bmc",
        disableCertificateVerification: true,
      },
    },
  };

  it("the host annotation of a Machine / Metal3Machine", () => {
    expect(hostFromAnnotation({ "metal3.io/BareMetalHost": "metal3/worker-0" })).toEqual({
      namespace: "metal3",
      name: "worker-0",
    });
    expect(hostFromAnnotation({ "metal3.io/BareMetalHost": "worker-0" })).toBeUndefined();
    expect(hostFromAnnotation({})).toBeUndefined();
  });

  it("settings from a BareMetalHost", () => {
    expect(settingsFromHost("n0", host)).toEqual({
      node: "n0",
      address: host.spec.bmc.address,
      credentialsSecret: { name: "worker-0-bmc", namespace: "metal3" },
      options: { insecure: true },
      source: "baremetalhost",
    });
  });

  it("reboot annotation hold and release", () => {
    const key = rebootAnnotationKey("INC_42/x");
    expect(key).toBe("reboot.metal3.io/fastfence-inc-42-x");
    expect(holdPoweredOffPatch("INC_42/x").metadata.annotations[key]).toBe('{"mode":"hard"}');
    expect(releasePatch("INC_42/x").metadata.annotations[key]).toBeNull();
  });
});

describe("fence agent stdin", () => {
  it("puts credentials last, only on stdin lines", () => {
    const s = agentStdin("status", {
      agent: "fence_ipmilan",
      username: "admin",
      password: "p w",
      params: { ip: "10.0.0.1", lanplus: true, cipher: 3 },
    });
    expect(s).toBe("action=status\nip=10.0.0.1\nlanplus=1\ncipher=3\nusername=admin\npassword=p w\n");
  });
  it("rejects newline injection and credentials in params", () => {
    expect(() => agentStdin("off", { agent: "fence_x", password: "a\naction=on", params: {} })).toThrow(
      FastfenceError,
    );
    expect(() => agentStdin("off", { agent: "fence_x", params: { ip: "1\naction=on" } })).toThrow(
      FastfenceError,
    );
    expect(() => agentStdin("off", { agent: "fence_x", params: { password: "x" } })).toThrow(FastfenceError);
  });
  it("scrubs secrets from agent output", () => {
    expect(scrub("login admin with s3cret failed", ["s3cret", "admin"])).toBe(
      "login [redacted] with [redacted] failed",
    );
  });
});
