// The lab's one chart shape, as hand-written SVG: labelled rows of horizontal bars against
// a time axis in seconds (linear or log), with optional group headers, whiskers (p99) and
// ticks (max), hatched range bars (stated references), vertical markers (goals), a legend
// and a wrapped caption. Every text is measured (lab/svg-text.ts) and the canvas is sized
// around it, so nothing is clipped. Pure: data in, SVG text out. The demo's and chaos'
// timelines are one use (timelineSvg), the bench's scenario chart another (bench-chart.ts).
import {
  esc,
  fmtSeconds,
  FONT_FAMILY,
  linearTicks,
  logTicks,
  r1,
  textWidth,
  tickLabel,
  wrap,
} from "./svg-text.ts";

export interface Axis {
  scale: "linear" | "log";
  label: string;
}

/** Extra attributes on a row's <g> (e.g. data-scenario), for tests and readers of the SVG. */
type Tagged = { attrs?: Record<string, string> };
export type Row = Tagged &
  /** A group's title (bold, indented), or a section's (`section`: larger, not indented). */
  (
    | { kind: "header"; text: string; section?: boolean }
    /** Bar from the axis start through each segment's end; whisker to p99, tick at max. */
    | {
        kind: "bar";
        label: string;
        segments: { toMs: number; color: string }[];
        p99?: number;
        max?: number;
        note: string;
        hatched?: boolean;
      }
    /** A stated range (e.g. a peer's figure): a hatched bar from loMs to hiMs. */
    | { kind: "range"; label: string; loMs: number; hiMs: number; note: string }
    /** No bar: a sentence in the plot area. */
    | { kind: "text"; label: string; text: string; color?: string }
  );

export interface Chart {
  title: string;
  subtitle?: string[];
  legend?: { label: string; color: string; hatched?: boolean }[];
  rows: Row[];
  axis: Axis;
  markers?: { label: string; ms: number; color: string }[];
  caption?: string[];
}

const PAD = 14;
const ROW = 24;
const BAR = 14;
const FS = 12;
const TITLE = 15;
const HATCH = "#8a8a8a";

function ticksFor(c: Chart): number[] {
  const vals = c.rows.flatMap((r) =>
    r.kind === "bar"
      ? [...r.segments.map((s) => s.toMs), r.p99 ?? 0, r.max ?? 0]
      : r.kind === "range"
        ? [r.loMs, r.hiMs]
        : [],
  );
  const all = [...vals, ...(c.markers ?? []).map((m) => m.ms)].filter((v) => v > 0);
  if (c.axis.scale === "linear") return linearTicks(Math.max(1000, ...all) * 1.02);
  return logTicks(Math.min(1000, ...all), Math.max(2000, ...all));
}

const headerSize = (r: { section?: boolean }) => (r.section ? FS + 1 : FS);
const headerX = (r: { section?: boolean }) => (r.section ? PAD : PAD + 10);

const fillOf = (color: string, hatched?: boolean) =>
  hatched ? `fill="url(#hatch)" stroke="${color}"` : `fill="${color}"`;

const attrsOf = (r: Tagged) =>
  Object.entries(r.attrs ?? {})
    .map(([k, v]) => ` ${k}="${esc(v)}"`)
    .join("");

export function chartSvg(c: Chart): string {
  const ticks = ticksFor(c);
  const [t0, tN] = [ticks[0]!, ticks.at(-1)!];
  const labelW = Math.max(0, ...c.rows.map((r) => (r.kind === "header" ? 0 : textWidth(r.label))));
  const firstTickHalf = textWidth(tickLabel(t0)) / 2;
  const plotX0 = Math.max(PAD + labelW + 12, PAD + firstTickHalf);
  const plotW = c.axis.scale === "log" ? 620 : 560;
  const x = (ms: number) => {
    if (c.axis.scale === "linear") return plotX0 + (plotW * Math.max(0, Math.min(ms, tN))) / tN;
    const v = Math.min(Math.max(ms, t0), tN);
    return plotX0 + (plotW * Math.log(v / t0)) / Math.log(tN / t0);
  };
  const rights: number[] = [
    PAD + textWidth(c.title, TITLE, true),
    ...(c.subtitle ?? []).map((s) => PAD + textWidth(s)),
    plotX0 + plotW + textWidth(tickLabel(tN)) / 2,
    plotX0 + textWidth(c.axis.label),
  ];
  const noteX = (r: Row): number => {
    if (r.kind === "bar")
      return Math.max(...r.segments.map((s) => x(s.toMs)), x(r.p99 ?? 0), x(r.max ?? 0)) + 6;
    if (r.kind === "range") return x(r.hiMs) + 6;
    return plotX0 + 6;
  };
  for (const r of c.rows) {
    if (r.kind === "header") rights.push(headerX(r) + textWidth(r.text, headerSize(r), true));
    else rights.push(noteX(r) + textWidth(r.kind === "text" ? r.text : r.note));
  }
  // Legend: swatch + label, one line.
  let lx = PAD;
  const legend = (c.legend ?? []).map((l) => {
    const at = lx;
    lx += 14 + textWidth(l.label) + 22;
    return { ...l, at };
  });
  if (legend.length) rights.push(lx - 22);
  // Marker labels in lanes so that no two overlap (left to right).
  const lanes: number[] = [];
  const markers = [...(c.markers ?? [])]
    .sort((a, b) => a.ms - b.ms)
    .map((m) => {
      const left = x(m.ms) + 3;
      const right = left + textWidth(m.label);
      let lane = lanes.findIndex((end) => end + 8 < left);
      if (lane < 0) lane = lanes.push(right) - 1;
      else lanes[lane] = right;
      rights.push(right);
      return { ...m, lane };
    });
  let w = Math.ceil(Math.max(...rights) + PAD);
  const captionW = Math.max(w - 2 * PAD, 560);
  const caption = (c.caption ?? []).flatMap((p) => wrap(p, captionW));
  w = Math.max(w, Math.ceil(captionW + 2 * PAD));

  // Vertical layout.
  let y = PAD;
  const titleY = y + TITLE;
  y += TITLE + 10;
  const subY = (c.subtitle ?? []).map(() => ((y += 17), y - 4));
  const legendY = legend.length ? ((y += 18), y - 4) : 0;
  const laneTop = y + 4;
  y = laneTop + lanes.length * 16 + (lanes.length ? 4 : 0);
  const plotTop = y + 4;
  const plotBottom = plotTop + c.rows.length * ROW;
  const tickY = plotBottom + 17;
  const axisY = plotBottom + 35;
  const capY = caption.map((_, i) => axisY + 22 + i * 16);
  const h = Math.ceil((capY.at(-1) ?? axisY) + 5 + PAD);

  const p: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="${FONT_FAMILY}" font-size="${FS}">`,
    `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f2f2f2"/><line x1="0" y1="0" x2="0" y2="6" stroke="${HATCH}" stroke-width="2"/></pattern></defs>`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="${PAD}" y="${titleY}" font-size="${TITLE}" font-weight="bold">${esc(c.title)}</text>`,
    ...(c.subtitle ?? []).map((s, i) => `<text x="${PAD}" y="${subY[i]}" fill="#555">${esc(s)}</text>`),
  ];
  for (const l of legend) {
    p.push(
      `<rect x="${r1(l.at)}" y="${legendY - 9}" width="10" height="10" ${fillOf(l.color, l.hatched)}/>`,
      `<text x="${r1(l.at + 14)}" y="${legendY}">${esc(l.label)}</text>`,
    );
  }
  // Grid, axis and ticks.
  for (const t of ticks) {
    const tx = r1(x(t));
    p.push(`<line x1="${tx}" y1="${plotTop}" x2="${tx}" y2="${plotBottom}" stroke="#e6e6e6"/>`);
    p.push(`<line x1="${tx}" y1="${plotBottom}" x2="${tx}" y2="${plotBottom + 4}" stroke="#888"/>`);
    p.push(`<text x="${tx}" y="${tickY}" text-anchor="middle" fill="#555">${esc(tickLabel(t))}</text>`);
  }
  p.push(
    `<line x1="${r1(plotX0)}" y1="${plotBottom}" x2="${r1(plotX0 + plotW)}" y2="${plotBottom}" stroke="#888"/>`,
    `<text x="${r1(plotX0)}" y="${axisY}" fill="#555">${esc(c.axis.label)}</text>`,
  );
  c.rows.forEach((r, i) => p.push(...rowSvg(r, plotTop + i * ROW, plotX0, x, noteX)));
  for (const m of markers) {
    const mx = r1(x(m.ms));
    const ly = laneTop + m.lane * 16 + 12;
    p.push(
      `<line x1="${mx}" y1="${ly + 3}" x2="${mx}" y2="${plotBottom}" stroke="${m.color}" stroke-dasharray="4 3"/>`,
      `<text x="${r1(mx + 3)}" y="${ly}" fill="${m.color}">${esc(m.label)}</text>`,
    );
  }
  caption.forEach((line, i) => p.push(`<text x="${PAD}" y="${capY[i]}" fill="#555">${esc(line)}</text>`));
  p.push("</svg>");
  return p.join("\n");
}

function rowSvg(
  r: Row,
  top: number,
  plotX0: number,
  x: (ms: number) => number,
  noteX: (r: Row) => number,
): string[] {
  const base = top + ROW / 2 + 4;
  const barY = top + (ROW - BAR) / 2;
  const mid = top + ROW / 2;
  const out: string[] = [`<g${attrsOf(r)}>`];
  if (r.kind === "header") {
    const size = r.section ? ` font-size="${headerSize(r)}"` : "";
    out.push(`<text x="${headerX(r)}" y="${base}"${size} font-weight="bold">${esc(r.text)}</text>`, "</g>");
    return out;
  }
  out.push(`<text x="${r1(plotX0 - 10)}" y="${base}" text-anchor="end">${esc(r.label)}</text>`);
  if (r.kind === "bar") {
    let from = plotX0;
    for (const s of r.segments) {
      const to = Math.max(from, x(s.toMs));
      out.push(
        `<rect x="${r1(from)}" y="${barY}" width="${r1(Math.max(to - from, from === plotX0 ? 2 : 0))}" height="${BAR}" ${fillOf(s.color, r.hatched)}/>`,
      );
      from = to;
    }
    if (r.p99 !== undefined && x(r.p99) > from)
      out.push(`<line x1="${r1(from)}" y1="${mid}" x2="${r1(x(r.p99))}" y2="${mid}" stroke="#333"/>`);
    if (r.max !== undefined)
      out.push(
        `<line x1="${r1(x(r.max))}" y1="${barY}" x2="${r1(x(r.max))}" y2="${barY + BAR}" stroke="#333"/>`,
      );
    out.push(`<text x="${r1(noteX(r))}" y="${base}" fill="#222">${esc(r.note)}</text>`);
  } else if (r.kind === "range") {
    const x0 = x(r.loMs);
    out.push(
      `<rect x="${r1(x0)}" y="${barY}" width="${r1(Math.max(3, x(r.hiMs) - x0))}" height="${BAR}" ${fillOf(HATCH, true)}/>`,
      `<text x="${r1(noteX(r))}" y="${base}" fill="#222">${esc(r.note)}</text>`,
    );
  } else {
    out.push(`<text x="${r1(noteX(r))}" y="${base}" fill="${r.color ?? "#555"}">${esc(r.text)}</text>`);
  }
  out.push("</g>");
  return out;
}

/** A timeline: one row per milestone, a bar from the fault to it, goals as dashed lines. */
export function timelineSvg(
  title: string,
  rows: { label: string; ms: number }[],
  goals: { label: string; ms: number }[] = [],
  axisLabel = "seconds from the fault",
): string {
  return chartSvg({
    title,
    axis: { scale: "linear", label: axisLabel },
    rows: rows.map((r) => ({
      kind: "bar",
      label: r.label,
      segments: [{ toMs: r.ms, color: "#4a7bd0" }],
      note: fmtSeconds(r.ms),
    })),
    markers: goals.map((g) => ({ ...g, color: "#c03a3a" })),
  });
}
