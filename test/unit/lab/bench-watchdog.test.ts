import { describe, expect, it } from "vitest";
import { percentiles } from "../../../lab/bench-chart.ts";
import {
  labWatchdogBoundMs,
  trialsFor,
  WATCHDOG_PEERS,
  watchdogSection,
} from "../../../lab/bench-watchdog.ts";
import { SCENARIOS } from "../../../lab/scenarios.ts";
import { LAB_WATCHDOG } from "../../../lab/watchdog.ts";

describe("bench: the watchdog scenarios", () => {
  it("power-loss and isolate are faulted scenarios that put the lab back (BMC answers again, node reconnected)", () => {
    for (const sc of ["power-loss", "isolate"] as const) {
      expect(SCENARIOS[sc].faulted).toBe(true);
      expect(SCENARIOS[sc].baseline).toBe(false);
      expect(SCENARIOS[sc].undo).toBeDefined();
      // Followed long enough for grace + timeout + a margin and the release after it.
      expect(SCENARIOS[sc].followMs!).toBeGreaterThan(labWatchdogBoundMs(5_000) + 10_000);
    }
  });

  it.each([
    ["crash", { trials: 20, trialsGiven: false, other: 3 }, 20],
    ["hang", { trials: 20, trialsGiven: false, other: 3 }, 3],
    ["power-loss", { trials: 20, trialsGiven: false, other: 3 }, 5],
    ["isolate", { trials: 5, trialsGiven: true, other: 3 }, 5],
    ["isolate", { trials: 2, trialsGiven: true, other: 3 }, 2],
    ["power-loss", { trials: 20, trialsGiven: true, other: 3, watchdogTrials: 7 }, 7],
  ])("trials of %s with %j: %d", (sc, o, want) => expect(trialsFor(sc, o)).toBe(want));

  it("the peers' defaults add up as their sources state", () => {
    const sbd = WATCHDOG_PEERS.find((p) => p.id === "sbd")!;
    expect(sbd.releaseAfterMs).toBe(2 * 5_000);
    const snr = WATCHDOG_PEERS.find((p) => p.id === "snr")!;
    // 3 × (apiCheckInterval 15 + apiServerTimeout 5) + 30 (no peers) + 60 (softdog) + 30 (padding)
    expect(snr.releaseAfterMs).toBe(Math.max((3 * (15 + 5) + 30 + 60 + 30) * 1000, 180_000));
    for (const p of WATCHDOG_PEERS) expect(p.source).toMatch(/\w/);
  });

  it("the section puts crash first, then power-loss and isolate, and the peers", () => {
    const released = {
      isolate: percentiles([9100, 9300, 9200, 9400, 9000]),
      crash: percentiles([1500, 1600, 1700]),
      "power-loss": percentiles([8800, 8900, 9000, 9100, 9200]),
    };
    const { lines, summary } = watchdogSection(released);
    const rows = lines.filter((l) => /^\| (crash|power-loss|isolate) \|/.test(l));
    expect(rows.map((l) => l.split("|")[1]!.trim())).toEqual(["crash", "power-loss", "isolate"]);
    expect(rows[1]).toContain("| 5 | 9.00 s | 9.20 s | 9.20 s |");
    expect(lines.join("\n")).toMatch(/Self Node Remediation.*180\.00 s/);
    expect(lines.join("\n")).toMatch(/SBD.*10\.00 s/);
    expect(summary).toMatchObject({
      labBoundMs: LAB_WATCHDOG.renewGraceMs + LAB_WATCHDOG.timeoutMs,
      peers: { sbd: 10_000, snr: 180_000 },
    });
  });

  it("a scenario that ran without a completed trial shows n 0", () => {
    const { lines } = watchdogSection({ crash: undefined, isolate: undefined });
    expect(lines.find((l) => l.startsWith("| isolate |"))).toBe("| isolate | 0 | - | - | - |");
  });
});
