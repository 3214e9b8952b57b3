// Test helper: scrapes the Prometheus metrics of in-process function replicas the way a
// Prometheus would, over HTTP: each replica's registry is served on /metrics on a loopback
// port (as `fastfence run --metrics-port` serves it), fetched once, and the text format
// parsed into samples; `total` sums a series over replicas. Loopback only; servers closed
// before it returns.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { HostedFunction } from "../../app/host.ts";

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (no escaped quotes in fastfence's label values). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** GET /metrics of every replica, each served on its own loopback port for the request. */
export async function scrapeReplicas(functions: HostedFunction[]): Promise<Sample[]> {
  const all: Sample[] = [];
  for (const f of functions) {
    const server = createServer((req, res) => {
      if (req.url !== "/metrics") return void res.writeHead(404).end();
      void f.metrics.registry
        .metrics()
        .then((m) => res.writeHead(200, { "content-type": f.metrics.registry.contentType }).end(m));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      if (res.status !== 200) throw new Error(`/metrics of ${f.name}: HTTP ${res.status}`);
      all.push(...parseMetrics(await res.text()));
    } finally {
      await new Promise((r) => server.close(r));
    }
  }
  return all;
}

/** The sum of a series over the samples whose labels include `labels`. */
export function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}
