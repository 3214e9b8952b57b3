// `fastfence events catalog`: prints the CloudEvents catalog as a table (default) or as
// an AsyncAPI 3 document (JSON) generated from the zod schemas. Read-only.
import { parseArgs } from "node:util";
import { CATALOG } from "../events/catalog.ts";
import { asyncApiDocument } from "../events/asyncapi.ts";
import { FastfenceError } from "../core/errors.ts";

export async function eventsCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { format: { type: "string", default: "table" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help || positionals[0] !== "catalog") {
    console.log("Usage: fastfence events catalog [--format table|asyncapi]");
    return values.help ? 0 : 2;
  }
  if (values.format === "asyncapi") {
    console.log(JSON.stringify(asyncApiDocument(), null, 2));
    return 0;
  }
  if (values.format !== "table")
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      `--format must be table or asyncapi, not "${values.format}"`,
    );
  const rows = Object.values(CATALOG).map((e) => [
    e.type,
    e.topic,
    e.emittedBy.join(","),
    e.consumedBy.join(",") || "-",
  ]);
  const head = ["TYPE", "TOPIC", "EMITTED BY", "CONSUMED BY"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join("  "));
  return 0;
}
