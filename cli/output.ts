// Serialises a command's result for `-o text|json|yaml`: JSON indented by 2, YAML from the
// same JSON value (so both carry exactly the same data), text from the command's own
// formatter or a generic key/value + table layout. Pure: returns strings, prints nothing.
import { dump } from "js-yaml";
import type { OutputFormat } from "./args.ts";

/** `value` as `format`; `text` renders the text form (default: `textOf`). */
export function render(
  format: OutputFormat,
  value: unknown,
  text: () => string = () => textOf(value),
): string {
  if (format === "text") return text();
  const plain = JSON.parse(JSON.stringify(value ?? null)) as unknown;
  if (format === "json") return JSON.stringify(plain, null, 2);
  return dump(plain, { noRefs: true, lineWidth: 120 }).trimEnd();
}

const scalar = (v: unknown): string =>
  v === undefined || v === null
    ? "-"
    : typeof v === "object"
      ? Array.isArray(v)
        ? v.map(scalar).join(",") || "-"
        : Object.entries(v as Record<string, unknown>)
            .map(([k, x]) => `${k}=${scalar(x)}`)
            .join(" ")
      : String(v);

/** Rows of objects as an aligned table, one column per key (first-seen order). */
export function table(rows: readonly Record<string, unknown>[]): string {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = [cols.map((c) => c.toUpperCase()), ...rows.map((r) => cols.map((c) => scalar(r[c])))];
  const widths = cols.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/**
 * A generic text form: `key: value` lines for an object's scalar fields, an aligned table
 * for a field holding a list of objects; a list of objects alone is a table.
 */
export function textOf(value: unknown): string {
  const isRows = (v: unknown): v is Record<string, unknown>[] =>
    Array.isArray(v) &&
    v.length > 0 &&
    v.every((x) => typeof x === "object" && x !== null && !Array.isArray(x));
  if (isRows(value)) return table(value);
  if (typeof value !== "object" || value === null || Array.isArray(value)) return scalar(value);
  const lines: string[] = [];
  const tables: string[] = [];
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (isRows(v)) tables.push(`${k}:\n${table(v)}`);
    else lines.push(`${k}: ${scalar(v)}`);
  }
  return [...lines, ...tables].join("\n");
}

/** Word-wraps `text` to `width` columns; lines after the first are indented by `indent` spaces. */
export function wrap(text: string, width: number, indent: number): string {
  const body = text.trimStart();
  const lines: string[] = [];
  let line = text.slice(0, text.length - body.length);
  let empty = true;
  for (const word of body.split(" ")) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = " ".repeat(indent) + word;
    } else line = empty ? line + word : `${line} ${word}`;
    empty = false;
  }
  return [...lines, line].join("\n");
}
