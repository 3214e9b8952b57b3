// The pure rules of API endpoint discovery (core/kube-endpoints.ts): the setting, the slice's
// URLs, the try order and the refresh policy.
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import {
  DEFAULT_REFRESH,
  candidateList,
  earlyRefreshDue,
  nextRefreshDelay,
  parseKubeEndpointsSetting,
  refreshLogEvent,
  suspectsAt,
  tryOrder,
  urlsFromSlice,
  cycleOrder,
  readAttemptCount,
} from "../../../core/kube-endpoints.ts";
import { loadRuntimeConfig } from "../../../infra/config.ts";

describe("parseKubeEndpointsSetting", () => {
  it("reads URLs and the auto keyword, in order, each once", () => {
    expect(parseKubeEndpointsSetting(undefined)).toEqual({ discover: false, urls: [] });
    expect(parseKubeEndpointsSetting(" ")).toEqual({ discover: false, urls: [] });
    expect(parseKubeEndpointsSetting("auto")).toEqual({ discover: true, urls: [] });
    expect(
      parseKubeEndpointsSetting("https://10.0.0.2:6443, auto,https://10.0.0.1:6443,https://10.0.0.2:6443"),
    ).toEqual({ discover: true, urls: ["https://10.0.0.2:6443", "https://10.0.0.1:6443"] });
  });

  it("refuses plain HTTP, paths and other words, naming each", () => {
    for (const bad of [
      "http://10.0.0.1:6443",
      "https://10.0.0.1:6443/api",
      "10.0.0.1:6443",
      "Auto",
      "discover",
    ]) {
      let err: unknown;
      try {
        parseKubeEndpointsSetting(`auto,${bad}`);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).message).toContain(bad);
      expect((err as InvalidInputError).issues).toEqual([`FASTFENCE_KUBE_ENDPOINTS: ${bad}`]);
    }
  });
});

describe("the runtime config", () => {
  it("accepts auto and URLs, refuses a bad entry naming the variable", () => {
    expect(loadRuntimeConfig({ FASTFENCE_KUBE_ENDPOINTS: "auto" }).FASTFENCE_KUBE_ENDPOINTS).toBe("auto");
    expect(() => loadRuntimeConfig({ FASTFENCE_KUBE_ENDPOINTS: "auto,10.0.0.1:6443" })).toThrow(
      /FASTFENCE_KUBE_ENDPOINTS.*10\.0\.0\.1:6443/,
    );
  });
});

describe("urlsFromSlice", () => {
  const slice = {
    addressType: "IPv4",
    endpoints: [
      { addresses: ["192.168.1.12"], conditions: { ready: true } },
      { addresses: ["192.168.1.10"] },
      { addresses: ["192.168.1.11"], conditions: { ready: false } },
      { addresses: ["192.168.1.10"] },
    ],
    ports: [{ name: "https", port: 6443, protocol: "TCP" }],
  };

  it("gives every endpoint not marked unready, sorted, once, on the https port", () => {
    expect(urlsFromSlice(slice)).toEqual(["https://192.168.1.10:6443", "https://192.168.1.12:6443"]);
  });

  it("takes the port named https among several, or the only one", () => {
    const ports = [
      { name: "metrics", port: 9000 },
      { name: "https", port: 443 },
    ];
    expect(urlsFromSlice({ ...slice, ports })).toEqual([
      "https://192.168.1.10:443",
      "https://192.168.1.12:443",
    ]);
    expect(urlsFromSlice({ ...slice, ports: [{ port: 8443 }] })[0]).toBe("https://192.168.1.10:8443");
    expect(
      urlsFromSlice({
        ...slice,
        ports: [
          { name: "a", port: 1 },
          { name: "b", port: 2 },
        ],
      }),
    ).toEqual([]);
    expect(urlsFromSlice({ ...slice, ports: [{ name: "https", port: 443, protocol: "UDP" }] })).toEqual([]);
    expect(urlsFromSlice({ ...slice, ports: [] })).toEqual([]);
  });

  it("brackets IPv6, gives nothing for FQDN slices or non-addresses", () => {
    expect(
      urlsFromSlice({
        addressType: "IPv6",
        endpoints: [{ addresses: ["fd00::1"] }],
        ports: [{ name: "https", port: 6443 }],
      }),
    ).toEqual(["https://[fd00::1]:6443"]);
    expect(urlsFromSlice({ ...slice, addressType: "FQDN" })).toEqual([]);
    expect(
      urlsFromSlice({
        ...slice,
        endpoints: [{ addresses: ["evil.example.com", "10.0.0.1/8", "300.1.1.1", "10.0.0.7"] }],
      }),
    ).toEqual(["https://10.0.0.7:6443"]);
    expect(urlsFromSlice({})).toEqual([]);
  });
});

describe("candidateList and tryOrder", () => {
  const svc = "https://10.96.0.1:443";
  const [a, b, c] = ["https://192.168.1.10:6443", "https://192.168.1.11:6443", "https://192.168.1.12:6443"];

  it("puts the kubeconfig's server first, then configured, then discovered, each once", () => {
    expect(candidateList(svc, [b], [a, b, c])).toEqual([svc, b, a, c]);
    expect(candidateList(a, [], [a, b])).toEqual([a, b]);
  });

  it("starts at the last endpoint that answered and wraps", () => {
    const list = [svc, a, b, c];
    expect(tryOrder(list, undefined)).toEqual(list);
    expect(tryOrder(list, svc)).toEqual(list);
    expect(tryOrder(list, b)).toEqual([b, c, svc, a]);
    expect(tryOrder(list, "https://192.168.1.99:6443")).toEqual(list);
  });

  it("tries endpoints that failed lately last", () => {
    expect(tryOrder([svc, a, b, c], svc, new Set([svc, a]))).toEqual([b, c, svc, a]);
    expect(tryOrder([svc, a, b, c], b, new Set([b]))).toEqual([c, svc, a, b]);
    const failedAt = new Map([
      [a, 1000],
      [b, 40_000],
    ]);
    expect([...suspectsAt(failedAt, 41_000)]).toEqual([b]);
    expect([...suspectsAt(failedAt, 30_999)]).toEqual([a, b]);
  });
});

describe("refresh policy", () => {
  it("reads every interval, retries sooner after a failure with doubling, capped at the interval", () => {
    expect(nextRefreshDelay(DEFAULT_REFRESH, 0)).toBe(10_000);
    expect([1, 2, 3, 4, 5, 50].map((f) => nextRefreshDelay(DEFAULT_REFRESH, f))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
  });

  it("starts an early read after a failover at most once per spacing, never beside one in flight", () => {
    expect(earlyRefreshDue(DEFAULT_REFRESH, undefined, 0, false)).toBe(true);
    expect(earlyRefreshDue(DEFAULT_REFRESH, 5000, 5999, false)).toBe(false);
    expect(earlyRefreshDue(DEFAULT_REFRESH, 5000, 6000, false)).toBe(true);
    expect(earlyRefreshDue(DEFAULT_REFRESH, 5000, 60_000, true)).toBe(false);
  });

  it("logs only the change between working and failing", () => {
    expect(refreshLogEvent(false, true)).toBe("failing");
    expect(refreshLogEvent(true, true)).toBeUndefined();
    expect(refreshLogEvent(true, false)).toBe("recovered");
    expect(refreshLogEvent(false, false)).toBeUndefined();
  });
});

describe("cycleOrder and readAttemptCount", () => {
  const [a, b, c] = ["https://192.168.1.10:6443", "https://192.168.1.11:6443", "https://192.168.1.12:6443"];

  it("repeats the order up to the count, never less than one pass", () => {
    expect(cycleOrder([a, b, c], 5)).toEqual([a, b, c, a, b]);
    expect(cycleOrder([a], 3)).toEqual([a, a, a]);
    expect(cycleOrder([a, b, c], 2)).toEqual([a, b, c]);
    expect(cycleOrder([], 4)).toEqual([]);
  });

  it("launches as many reads as end within the budget, at least one", () => {
    expect(readAttemptCount(2000, 500, 4000)).toBe(5); // at 0, .5, 1, 1.5, 2 s: the last ends at 4 s
    expect(readAttemptCount(2000, 500, 2000)).toBe(1);
    expect(readAttemptCount(2000, 500, 1000)).toBe(1);
    expect(readAttemptCount(2000, 0, 4000)).toBe(1);
  });
});
