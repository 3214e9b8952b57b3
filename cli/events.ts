// `fastfence events catalog`: prints one of two documents — the CloudEvents catalog
// (--format catalog, the default) or the AsyncAPI 3 document generated from the zod
// schemas (--format asyncapi) — serialised as -o text|json|yaml. Read-only; no I/O
// besides stdout.
import { CATALOG } from "../events/catalog.ts";
import { asyncApiDocument } from "../events/asyncapi.ts";
import { outputHelp, parseChoice, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { render, table } from "./output.ts";
import { EVENT_DOCUMENTS, EVENTS_ARGS, EVENTS_SUBCOMMANDS } from "./specs.ts";

export { EVENTS_ARGS };

const USAGE = `Usage: fastfence events catalog [--format catalog|asyncapi] [-o text|json|yaml]

  --format DOC            which document: catalog (default; every event type, its topic, who emits
                          and consumes it) or asyncapi (the AsyncAPI 3 document, with data schemas)
${outputHelp(EVENTS_ARGS, "text is a table; the AsyncAPI document has no text form and defaults to json")}
  -h, --help              this help

Deprecated (removed in the next release): --format table = --format catalog -o text.`;

/** The catalog as data: one entry per event type (schemas are in the AsyncAPI document). */
export function catalogEntries(): Record<string, unknown>[] {
  return Object.values(CATALOG).map((e) => ({
    type: e.type,
    topic: e.topic,
    partitionKey: e.partitionKey,
    emittedBy: [...e.emittedBy],
    consumedBy: [...e.consumedBy],
    repeated: e.repeated ?? false,
    description: e.description,
  }));
}

export async function eventsCommand(argv: string[]): Promise<number> {
  const args = parseCommand(EVENTS_ARGS, argv);
  if (args.help) return (console.log(USAGE), EXIT.ok);
  if (!(EVENTS_SUBCOMMANDS as readonly string[]).includes(args.positionals[0] ?? ""))
    throw new UsageError(
      "events",
      args.positionals[0]
        ? `unknown subcommand "${args.positionals[0]}" (only: catalog)`
        : "missing subcommand: fastfence events catalog",
    );
  let format = args.values.format ?? "catalog";
  let output = args.output;
  if (format === "table") {
    console.error(
      "fastfence events: --format table is deprecated and will be removed in the next release; use --format catalog -o text",
    );
    if (args.outputGiven && output !== "text")
      throw new UsageError("events", `--format table contradicts -o ${output}`);
    format = "catalog";
  }
  const doc = parseChoice("events", "--format", format, EVENT_DOCUMENTS);
  if (doc === "asyncapi") {
    if (!args.outputGiven) output = "json";
    if (output === "text")
      throw new UsageError("events", "the AsyncAPI document has no text form: use -o json or -o yaml");
    console.log(render(output, asyncApiDocument()));
    return EXIT.ok;
  }
  const entries = catalogEntries();
  console.log(
    render(output, entries, () =>
      table(
        entries.map((e) => ({
          type: e.type,
          topic: e.topic,
          "emitted by": e.emittedBy,
          "consumed by": e.consumedBy,
        })),
      ),
    ),
  );
  return EXIT.ok;
}
