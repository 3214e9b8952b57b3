// Where the lab's SVG text really lands, measured with a real renderer (resvg) and a font
// shipped as an npm package (DejaVu Sans, system fonts off), so the answer is the same on
// every machine: each <text> is rendered alone on the chart's root element and its glyphs'
// bounding box read back. Also renders a whole chart to PNG. Test helper only.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Resvg, type ResvgRenderOptions } from "@resvg/resvg-js";

const FONT_DIR = join(
  dirname(createRequire(import.meta.url).resolve("dejavu-fonts-ttf/package.json")),
  "ttf",
);

/** Only DejaVu Sans (regular and bold): every family the SVG asks for falls back to it. */
export const RENDER_OPTIONS: ResvgRenderOptions = {
  font: {
    loadSystemFonts: false,
    fontFiles: [join(FONT_DIR, "DejaVuSans.ttf"), join(FONT_DIR, "DejaVuSans-Bold.ttf")],
    defaultFontFamily: "DejaVu Sans",
    sansSerifFamily: "DejaVu Sans",
  },
  logLevel: "off",
};

export interface TextBox {
  text: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export function canvasOf(svg: string): { width: number; height: number } {
  const r = new Resvg(svg, RENDER_OPTIONS);
  return { width: r.width, height: r.height };
}

const unescape = (s: string) =>
  s
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&");

/** The drawn box of every <text> of the SVG (which must have no transforms around its texts). */
export function textBoxes(svg: string): TextBox[] {
  if (/\btransform=/.test(svg.replace(/<defs>[\s\S]*?<\/defs>/, "")))
    throw new Error("textBoxes does not follow transforms");
  const root = /^<svg\b[^>]*>/.exec(svg)?.[0];
  if (!root) throw new Error("not an SVG document");
  return [...svg.matchAll(/<text\b[^>]*>([^<]*)<\/text>/g)].map((m) => {
    const text = unescape(m[1]!);
    const bbox = new Resvg(`${root}${m[0]}</svg>`, RENDER_OPTIONS).getBBox();
    if (!bbox) throw new Error(`text ${JSON.stringify(text)} drew nothing (no font?)`);
    return { text, x: bbox.x, y: bbox.y, width: bbox.width, height: bbox.height };
  });
}

/** Texts not wholly inside the canvas. */
export function outside(boxes: TextBox[], c: { width: number; height: number }): TextBox[] {
  return boxes.filter((b) => b.x < 0 || b.y < 0 || b.x + b.width > c.width || b.y + b.height > c.height);
}

/** Pairs of texts whose boxes overlap. */
export function overlapping(boxes: TextBox[]): [string, string][] {
  const out: [string, string][] = [];
  boxes.forEach((a, i) => {
    for (const b of boxes.slice(i + 1))
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height)
        out.push([a.text, b.text]);
  });
  return out;
}

/** The whole chart as PNG, with its size. */
export function renderPng(svg: string): { png: Buffer; width: number; height: number } {
  const img = new Resvg(svg, RENDER_OPTIONS).render();
  return { png: img.asPng(), width: img.width, height: img.height };
}
