// Needs real lab: namespaces, veths, bridge and processes left after lab down or a SIGKILL.
// `fastfence lab up`, then the lab controller SIGKILLed: `lab down` from a fresh process
// cleans up from .cache/lab/state.json alone and leaves nothing behind — processes,
// network namespaces, veths, the bridge, listening ports, temp and run dirs, state.json
// (lab-leftovers.ts; after a normal `lab down` standalone-checkout checks the same). On the
// way, a node cut off from the host takes a function-only crash through its agent's
// control socket, and a crash is silent (no TCP reset from the dead node, a heal does not
// change that) until the node was powered off (fastfence fences it) and on, while a
// proc-crash still resets.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KUBELET_PORT } from "../../lab/types.ts";
import { LAB_RUN, ROOT, readState, type LabState } from "../../lab/state.ts";
import { leftovers, snapshot } from "./lab-leftovers.ts";

const cli = (...args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, "cli/main.ts"), "lab", ...args], {
    encoding: "utf8",
    timeout: 300_000,
    cwd: ROOT,
  });

/**
 * What a TCP connect to host:port meets within ms: an answer, a reset, or nothing. Nothing
 * includes EHOSTUNREACH: the host's own verdict once its ARP requests for the address went
 * unanswered (a neighbour entry already FAILED from an earlier knock gives it at once) — no
 * frame came from the node.
 */
function knock(host: string, port: number, ms: number): Promise<"connected" | "refused" | "silent" | string> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const done = (r: string) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => done("silent"), ms);
    sock.once("connect", () => done("connected"));
    sock.once("error", (e: NodeJS.ErrnoException) =>
      done(
        e.code === "ECONNREFUSED" ? "refused" : e.code === "EHOSTUNREACH" ? "silent" : (e.code ?? "error"),
      ),
    );
  });
}

const nodeStatus = (name: string) => {
  const st = cli("status", "-o", "json");
  expect(st.status, st.stderr).toBe(0);
  const doc = JSON.parse(st.stdout) as { nodes: { name: string; ip: string; power: string; link: string }[] };
  return doc.nodes.find((n) => n.name === name)!;
};

// One lab's story, in the order written also under --sequence.shuffle: up (faults on it),
// then its controller SIGKILLed and down.
describe("lab up / down", { shuffle: false }, () => {
  let s: LabState;

  it("up; a node cut off from the host still takes a function-only crash", () => {
    const up = cli("up");
    expect(up.status, up.stderr + up.stdout).toBe(0); // stderr first: the reason
    s = readState()!;
    expect(s.phase).toBe("ready");
    expect(s.netns.length).toBe(3);
    expect(snapshot(s).length).toBeGreaterThan(10);
    const st = cli("status", "-o", "json");
    expect(st.status, st.stderr).toBe(0);
    expect(st.stdout).toMatch(/"ready": "True"/);
    // A node cut off from the host still takes a function-only crash: the node agent's
    // control socket is out of band (chaos seed 183 failed its step over the network).
    const cut = cli("partial", "node-c", "--mode", "api");
    expect(cut.status, cut.stderr).toBe(0);
    const fn = cli("fn-crash", "node-c", "--functions", "detect", "--restart-after-ms", "500", "-o", "json");
    expect(fn.status, fn.stdout + fn.stderr).toBe(0);
    const functions = (JSON.parse(fn.stdout) as { functions: string[] }).functions;
    expect(functions).not.toContain("detect");
    expect(functions).toContain("confirm");
    // ... and starts the crashed replica again, as the kubelet would (chaos seed 189).
    const agentJson = join(LAB_RUN, "node-c", "agent.json");
    const running = () => (JSON.parse(readFileSync(agentJson, "utf8")) as { functions: string[] }).functions;
    const until = Date.now() + 60_000;
    while (!running().includes("detect") && Date.now() < until) spawnSync("sleep", ["0.5"]);
    expect(running()).toContain("detect");
    const bad = cli("fn-crash", "node-c", "--restart-after-ms", "soon");
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/--restart-after-ms needs a whole number of ms >= 0, not "soon"/);
    expect(cli("heal", "node-c").status).toBe(0);
  });

  it("crash is silent until power-off and power-on (a heal does not light it); proc-crash resets", async () => {
    const ip = nodeStatus("node-b").ip;
    expect(await knock(ip, KUBELET_PORT, 1000), "node-b's kubelet port before the crash").toBe("connected");
    const crash = cli("crash", "node-b");
    expect(crash.status, crash.stderr).toBe(0);
    // No reset, no ICMP: the connect meets nothing for a whole second.
    expect(await knock(ip, KUBELET_PORT, 1000), "a TCP connect to the crashed node").toBe("silent");
    expect(nodeStatus("node-b").link).toBe("down (dark)");
    expect(cli("heal", "node-b").status).toBe(0);
    expect(await knock(ip, KUBELET_PORT, 1000), "the crashed node after a heal").toBe("silent");
    // fastfence fences it (its BMC powers it off); off, it is as silent.
    const fencedBy = Date.now() + 90_000;
    while (nodeStatus("node-b").power !== "Off" && Date.now() < fencedBy) spawnSync("sleep", ["1"]);
    expect(nodeStatus("node-b").power, "node-b fenced (powered off) by fastfence").toBe("Off");
    expect(await knock(ip, KUBELET_PORT, 1000), "the fenced node").toBe("silent");
    const on = cli("power-on", "node-b");
    expect(on.status, on.stderr).toBe(0);
    expect(nodeStatus("node-b").link).toBe("up");
    const answersBy = Date.now() + 60_000;
    let after = await knock(ip, KUBELET_PORT, 1000);
    while (after !== "connected" && Date.now() < answersBy) after = await knock(ip, KUBELET_PORT, 1000);
    expect(after, "node-b's kubelet port after power-on").toBe("connected");
    // proc-crash: the processes die, the link stays up: the node's kernel refuses at once.
    const pc = cli("proc-crash", "node-b");
    expect(pc.status, pc.stderr).toBe(0);
    const t = Date.now();
    expect(await knock(ip, KUBELET_PORT, 1000), "a TCP connect to the proc-crashed node").toBe("refused");
    expect(Date.now() - t).toBeLessThan(500);
  }, 240_000);

  it("down after the lab controller was SIGKILLed leaves nothing behind", () => {
    const now = readState()!; // with what the faults above restarted
    const procs = snapshot(now);
    expect(procs.length).toBeGreaterThan(10);
    process.kill(now.controller!.pid, "SIGKILL");
    // What the check below must find gone is there until the down: its nodes, links, dirs.
    expect(leftovers(procs, now).length).toBeGreaterThanOrEqual(4);
    const down = cli("down");
    expect(down.status, down.stderr).toBe(0);
    expect(leftovers(procs, now)).toEqual([]);
  });
});
