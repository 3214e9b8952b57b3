// Lab reports: Markdown text and hand-written SVG charts (a fault timeline for one
// incident; per-phase percentile bars for the bench, fastfence beside the baseline).
// Pure formatting plus one writer that puts files under .cache/reports/. Never reads
// the lab or the cluster itself.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./state.ts";

export const REPORTS_DIR = join(ROOT, ".cache", "reports");

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A timeline chart: one row per milestone, a bar from the fault to it, goal lines. */
export function timelineSvg(
  title: string,
  rows: { label: string; ms: number }[],
  goals: { label: string; ms: number }[] = [],
): string {
  const w = 900;
  const left = 260;
  const rowH = 26;
  const top = 50;
  const h = top + rows.length * rowH + 50;
  const maxMs = Math.max(1000, ...rows.map((r) => r.ms), ...goals.map((g) => g.ms)) * 1.08;
  const x = (ms: number) => left + ((w - left - 30) * Math.max(0, ms)) / maxMs;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}</text>`,
  ];
  const step = maxMs > 20_000 ? 5000 : maxMs > 8000 ? 2000 : 1000;
  for (let t = 0; t <= maxMs; t += step) {
    parts.push(`<line x1="${x(t)}" y1="${top - 8}" x2="${x(t)}" y2="${h - 40}" stroke="#eee"/>`);
    parts.push(
      `<text x="${x(t)}" y="${h - 25}" text-anchor="middle" fill="#666">${(t / 1000).toFixed(0)} s</text>`,
    );
  }
  rows.forEach((r, i) => {
    const y = top + i * rowH;
    parts.push(`<text x="${left - 8}" y="${y + 15}" text-anchor="end">${esc(r.label)}</text>`);
    parts.push(
      `<rect x="${left}" y="${y + 4}" width="${Math.max(2, x(r.ms) - left)}" height="${rowH - 10}" fill="#4a7bd0" opacity="0.85"/>`,
    );
    parts.push(`<text x="${x(r.ms) + 4}" y="${y + 15}" fill="#222">${r.ms} ms</text>`);
  });
  for (const g of goals) {
    parts.push(
      `<line x1="${x(g.ms)}" y1="${top - 8}" x2="${x(g.ms)}" y2="${h - 40}" stroke="#d04a4a" stroke-dasharray="4 3"/>`,
    );
    parts.push(`<text x="${x(g.ms) + 3}" y="${top - 12}" fill="#d04a4a">${esc(g.label)}</text>`);
  }
  parts.push(`<text x="${left}" y="${h - 8}" fill="#666">time from the fault</text>`, "</svg>");
  return parts.join("\n");
}

export interface Percentiles {
  n: number;
  p50?: number;
  p95?: number;
  p99?: number;
  max?: number;
}

export function percentiles(values: (number | undefined)[]): Percentiles {
  const v = values.filter((x): x is number => typeof x === "number").sort((a, b) => a - b);
  if (v.length === 0) return { n: 0 };
  const q = (p: number) => v[Math.min(v.length - 1, Math.ceil(p * v.length) - 1)]!;
  return { n: v.length, p50: q(0.5), p95: q(0.95), p99: q(0.99), max: v[v.length - 1]! };
}

/** Grouped bars: per phase, p50 / p99 / max of each series (e.g. fastfence vs baseline). */
export function percentileSvg(
  title: string,
  phases: string[],
  series: { name: string; color: string; data: Record<string, Percentiles> }[],
  logScale = false,
): string {
  const w = 960;
  const left = 220;
  const groupH = 22 * series.length + 14;
  const top = 60;
  const h = top + phases.length * groupH + 50;
  const all = series.flatMap((s) => phases.map((p) => s.data[p]?.max ?? 0));
  const maxMs = Math.max(1000, ...all) * 1.1;
  const x = (ms: number) => {
    if (!logScale) return left + ((w - left - 120) * ms) / maxMs;
    const lo = Math.log10(100);
    return left + ((w - left - 120) * (Math.log10(Math.max(100, ms)) - lo)) / (Math.log10(maxMs) - lo);
  };
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}</text>`,
    `<text x="10" y="40" fill="#666">bar = p50, whisker to p99, tick = max${logScale ? " (log scale)" : ""}</text>`,
  ];
  series.forEach((s, i) => {
    parts.push(
      `<rect x="${w - 200}" y="${10 + i * 16}" width="10" height="10" fill="${s.color}"/><text x="${w - 185}" y="${19 + i * 16}">${esc(s.name)}</text>`,
    );
  });
  phases.forEach((p, gi) => {
    const y0 = top + gi * groupH;
    parts.push(`<text x="${left - 8}" y="${y0 + groupH / 2}" text-anchor="end">${esc(p)}</text>`);
    series.forEach((s, si) => {
      const d = s.data[p];
      const y = y0 + si * 22;
      if (!d || d.n === 0 || d.p50 === undefined) {
        parts.push(`<text x="${left + 4}" y="${y + 14}" fill="#999">${esc(s.name)}: n/a</text>`);
        return;
      }
      parts.push(
        `<rect x="${left}" y="${y + 3}" width="${Math.max(2, x(d.p50) - left)}" height="14" fill="${s.color}"/>`,
      );
      parts.push(`<line x1="${x(d.p50)}" y1="${y + 10}" x2="${x(d.p99!)}" y2="${y + 10}" stroke="#333"/>`);
      parts.push(`<line x1="${x(d.max!)}" y1="${y + 3}" x2="${x(d.max!)}" y2="${y + 17}" stroke="#333"/>`);
      parts.push(
        `<text x="${x(d.max!) + 5}" y="${y + 14}" fill="#222">p50 ${d.p50} / p99 ${d.p99} / max ${d.max} ms (n=${d.n})</text>`,
      );
    });
  });
  parts.push("</svg>");
  return parts.join("\n");
}

export function writeReport(base: string, files: Record<string, string>): string[] {
  mkdirSync(REPORTS_DIR, { recursive: true });
  return Object.entries(files).map(([ext, text]) => {
    const p = join(REPORTS_DIR, `${base}.${ext}`);
    writeFileSync(p, text);
    return p;
  });
}
