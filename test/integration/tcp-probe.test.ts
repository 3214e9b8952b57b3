// Needs real Linux processes: a SIGSTOPped listener whose kernel still accepts connections.
// The probe against real listening processes (issue 14, "frozen is not dead"): a node
// whose processes are frozen still has a kernel that completes TCP handshakes into the
// listen queue, so a connect alone would call it alive — for the observers (no suspicion)
// and for fence's last look (the round abandoned as NodeResponding). The probe must be
// answered by the process: a frozen one (SIGSTOP, a normal listen backlog) is a miss, the
// same process running again is answered, and so is a TLS server (the kubelet's port is
// one). Real sockets and processes on loopback; nothing is mocked.
import { spawn, type ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tcpProbe } from "../../source/tcp-probe.ts";
import { freePort } from "../../harness/env/ports.ts";

/** A process listening on loopback:port with a normal backlog; `mode` says what it does with a connection. */
const tlsDir = mkdtempSync(join(tmpdir(), "fastfence-probe-"));

async function listener(port: number, mode: "close" | "silent" | "tls"): Promise<ChildProcess> {
  const code = {
    // The lab's and the test clusters' kubelet port: accept and close.
    close: `require("net").createServer((s) => s.destroy()).listen(${port}, "127.0.0.1", () => console.log("up"))`,
    // Accepts and never answers nor closes: a listener that is alive but says nothing.
    silent: `const k=[];require("net").createServer((s) => k.push(s)).listen(${port}, "127.0.0.1", () => console.log("up"))`,
    // A TLS server (a self-signed certificate from openssl), as the kubelet's port is.
    tls:
      `const fs=require("fs");` +
      `require("tls").createServer({key:fs.readFileSync("${tlsDir}/key.pem"),cert:fs.readFileSync("${tlsDir}/cert.pem")},()=>{})` +
      `.listen(${port},"127.0.0.1",()=>console.log("up"))`,
  }[mode];
  const p = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  await once(p.stdout!, "data");
  return p;
}

/** The old probe: a connect only. */
function connects(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    const t = setTimeout(() => (s.destroy(), resolve(false)), timeoutMs);
    s.once("connect", () => (clearTimeout(t), s.destroy(), resolve(true)));
    s.once("error", () => (clearTimeout(t), resolve(false)));
  });
}

describe("tcpProbe against real processes", () => {
  const procs: ChildProcess[] = [];
  let closing: number;
  let silent: number;
  let tls: number;
  beforeAll(async () => {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=probe",
        "-days",
        "1",
        "-keyout",
        join(tlsDir, "key.pem"),
        "-out",
        join(tlsDir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    [closing, silent, tls] = await Promise.all([freePort(), freePort(), freePort()]);
    procs.push(
      await listener(closing, "close"),
      await listener(silent, "silent"),
      await listener(tls, "tls"),
    );
  });
  afterAll(() => {
    for (const p of procs) {
      p.kill("SIGCONT");
      p.kill("SIGKILL");
    }
    rmSync(tlsDir, { recursive: true, force: true });
  });

  it("a running listener that closes the connection answers", async () => {
    expect(await tcpProbe("127.0.0.1", closing, 250)).toMatchObject({ ok: true });
  });

  it("a TLS server answers the request line (as the kubelet's port does)", async () => {
    expect(await tcpProbe("127.0.0.1", tls, 250)).toMatchObject({ ok: true });
  });

  it("a frozen listener is a miss, although its kernel still accepts the connection", async () => {
    const p = procs[0]!;
    p.kill("SIGSTOP");
    try {
      expect(await connects(closing, 250)).toBe(true); // what a connect-only probe saw
      for (let i = 0; i < 5; i++)
        expect(await tcpProbe("127.0.0.1", closing, 250)).toMatchObject({ ok: false, missed: "answer" });
    } finally {
      p.kill("SIGCONT");
    }
    // Running again: answered (its queued connections are handled and closed too).
    expect(await tcpProbe("127.0.0.1", closing, 250)).toMatchObject({ ok: true });
  });

  it("a listener that accepts and stays silent is a miss", async () => {
    expect(await tcpProbe("127.0.0.1", silent, 250)).toMatchObject({ ok: false, missed: "answer" });
  });

  it("nothing listening is a miss at the connect", async () => {
    const port = await freePort();
    expect(await tcpProbe("127.0.0.1", port, 250)).toMatchObject({ ok: false, missed: "connect" });
  });
});
