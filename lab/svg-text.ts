// What the lab's SVG charts need to lay text out without a renderer: a conservative width
// of a string (per-character advances rounded up from DejaVu Sans, the widest common sans
// serif, so narrower fonts fit too), XML escaping, seconds for people, and time-axis ticks
// (linear, or 1-2-5 steps on a log scale). Pure functions; test/unit/lab/report-svg.test.ts
// checks the estimates against a real renderer.

/** Advance widths in em, rounded up from DejaVu Sans (units per em 2048). */
const NARROW = new Set([..."ijlI.,:;'!|`"]);
const SEMI = new Set([...'ftr()[]{}-/\\"* ']);
const WIDE = new Set([..."mwMW%@—…"]);
const MATH = new Set([..."+=<>~^#&$×÷≤≥≈→±"]);

function advance(ch: string): number {
  if (NARROW.has(ch)) return 0.4;
  if (SEMI.has(ch)) return 0.44;
  if (WIDE.has(ch)) return 1.02;
  if (MATH.has(ch)) return 0.86;
  if (ch === "·") return 0.34;
  if (ch === "–") return 0.52;
  if (/[0-9a-z_?]/.test(ch)) return 0.66;
  if (/[A-Z]/.test(ch)) return 0.82;
  return 1.05;
}

/** Width in px of `s` drawn at `size` px, never less than DejaVu Sans draws it. */
export function textWidth(s: string, size = 12, bold = false): number {
  let em = 0;
  for (const ch of s) em += advance(ch);
  return em * size * (bold ? 1.13 : 1);
}

/** The font stack the charts ask for: DejaVu Sans first (what the widths are measured from). */
export const FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif";

export const esc = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** 1 decimal place: coordinates in the SVG text. */
export const r1 = (n: number): number => Math.round(n * 10) / 10;

/** ms as seconds for a label, three significant digits or more: "0.84 s", "2.00 s", "13.1 s", "350 s". */
export function fmtSeconds(ms: number): string {
  const s = ms / 1000;
  return `${s.toFixed(s < 9.995 ? 2 : s < 99.95 ? 1 : 0)} s`;
}

/** A tick label: the shortest exact seconds ("0.5 s", "2 s", "200 s"). */
export const tickLabel = (ms: number): string => `${Number((ms / 1000).toFixed(3))} s`;

/** Linear ticks from 0: a 1-2-2.5-5 step giving at most `most` intervals; the last tick ≥ maxMs. */
export function linearTicks(maxMs: number, most = 8): number[] {
  const top = Math.max(maxMs, 1);
  let step = 100;
  for (let mag = 100; ; mag *= 10) {
    const found = [1, 2, 2.5, 5].map((k) => k * mag).find((s) => Math.ceil(top / s) <= most);
    if (found !== undefined) {
      step = found;
      break;
    }
  }
  const n = Math.ceil(top / step);
  return Array.from({ length: n + 1 }, (_, i) => i * step);
}

/** Log ticks in 1-2-5 steps, from the one at or below minMs to the one at or above maxMs. */
export function logTicks(minMs: number, maxMs: number): number[] {
  const steps: number[] = [];
  for (let mag = 10; mag <= 1e9; mag *= 10) for (const k of [1, 2, 5]) steps.push(k * mag);
  const lo = steps.filter((t) => t <= Math.max(minMs, 10)).at(-1) ?? 10;
  const hi = steps.find((t) => t >= maxMs) ?? steps.at(-1)!;
  return steps.filter((t) => t >= lo && t <= hi);
}

/** Greedy word wrap of `text` into lines no wider than `width` px at `size`. */
export function wrap(text: string, width: number, size = 12): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const next = line ? `${line} ${word}` : word;
    if (line && textWidth(next, size) > width) {
      lines.push(line);
      line = word;
    } else line = next;
  }
  if (line) lines.push(line);
  return lines;
}
