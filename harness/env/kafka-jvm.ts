// The Kafka broker JVM for the harness and the lab: classpath (with a working slf4j 2),
// log4j2 config, the class-data-sharing archive that makes a broker start ~1 s faster,
// JVM flags, and the steps before a broker runs: a cluster id, its server.properties and
// its formatted storage. Must never start a broker itself, nor bind anything.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { CACHE, EnvError } from "./base.ts";
import { runCommand } from "./process.ts";

const KAFKA_LIBS = join(CACHE, "kafka", "libs");

/**
 * The broker classpath. Kafka 4.1's Maven dependencies resolve slf4j-api 1.7 next to
 * log4j-slf4j2-impl, which leaves the broker with a no-op logger; when a 2.x slf4j-api
 * is available (in libs, or in the local Maven repository) use it instead.
 */
export function kafkaClasspath(): string {
  if (!existsSync(KAFKA_LIBS)) throw new EnvError(`${KAFKA_LIBS} is missing; run scripts/setup.sh kafka`);
  const jars = readdirSync(KAFKA_LIBS)
    .filter((f) => f.endsWith(".jar"))
    .sort();
  let slf4j2 = jars.find((j) => /^slf4j-api-2\./.test(j));
  let slf4j2Path = slf4j2 ? join(KAFKA_LIBS, slf4j2) : undefined;
  if (!slf4j2Path) {
    const m2 = join(homedir(), ".m2/repository/org/slf4j/slf4j-api");
    const versions = existsSync(m2) ? readdirSync(m2).filter((v) => v.startsWith("2.")) : [];
    for (const v of versions.sort().reverse()) {
      const p = join(m2, v, `slf4j-api-${v}.jar`);
      if (existsSync(p)) {
        slf4j2 = `slf4j-api-${v}.jar`;
        slf4j2Path = p;
        break;
      }
    }
  }
  const paths = jars
    .filter((j) => !(slf4j2Path && /^slf4j-api-1\./.test(j)))
    .filter((j) => j !== slf4j2)
    .map((j) => join(KAFKA_LIBS, j));
  return [...(slf4j2Path ? [slf4j2Path] : []), ...paths].join(":");
}

/** The brokers' log4j2 config (YAML): everything to `logFile`, client chatter at WARN. */
export function log4jConfig(logFile: string): string {
  return [
    "Configuration:",
    "  status: warn",
    "  Appenders:",
    "    File:",
    "      name: file",
    `      fileName: "${logFile}"`,
    "      PatternLayout:",
    '        pattern: "[%d] %p %m (%c)%n"',
    "  Loggers:",
    "    Root:",
    "      level: INFO",
    "      AppenderRef:",
    "        - ref: file",
    "    Logger:",
    "      - name: org.apache.kafka.clients",
    "        level: WARN",
    "      - name: kafka.request.logger",
    "        level: WARN",
    "",
  ].join("\n");
}

/**
 * A dynamic class-data-sharing archive of a broker's classes, keyed by the classpath
 * (jar names, sizes, mtimes): with it a broker JVM starts ~1 s faster. Built once by
 * buildKafkaCds() (`node harness/env/kafka-cds.ts`); without it brokers start normally.
 */
export function kafkaCdsPath(): string {
  const h = createHash("sha256");
  // What the dump run loads: since the brokers run TLS + SCRAM + the authorizer, an
  // archive without those classes would cost every start; the tag forces a rebuild.
  h.update("secured-1\n");
  for (const jar of kafkaClasspath().split(":")) {
    const st = statSync(jar);
    h.update(`${jar}:${st.size}:${st.mtimeMs}\n`);
  }
  return join(CACHE, "kafka", "cds", `broker-${h.digest("hex").slice(0, 16)}.jsa`);
}

/** JVM flags and classpath of a test/lab broker: small heap, fast start, CDS archive when built. */
export function jvmArgs(
  heap: string,
  log4jPath: string,
  cds: "use" | "none" | { dumpTo: string } = "use",
): string[] {
  const cdsArgs: string[] = [];
  if (cds === "use") {
    const archive = kafkaCdsPath();
    if (existsSync(archive))
      cdsArgs.push(
        `-XX:SharedArchiveFile=${archive}`,
        "-Xshare:auto",
        "-Xlog:cds=off",
        "-Xlog:class+path=off",
      );
  } else if (cds !== "none") {
    cdsArgs.push(`-XX:ArchiveClassesAtExit=${cds.dumpTo}`);
  }
  return [
    `-Xmx${heap}`,
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    ...cdsArgs,
    `-Dlog4j2.configurationFile=${log4jPath}`,
    "-cp",
    kafkaClasspath(),
  ];
}

/**
 * A Kafka cluster id: 16 random bytes, base64url without padding (22 chars). Never one
 * starting with "-": the storage tool's argument parser would take it for an option.
 */
export function newClusterId(): string {
  let clusterId = "";
  while (!clusterId || clusterId.startsWith("-"))
    clusterId = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64url");
  return clusterId;
}

/** Write a broker's server.properties (`key=value` lines). */
export function writeServerProperties(path: string, props: Record<string, string | number | boolean>): void {
  writeFileSync(
    path,
    Object.entries(props)
      .map(([k, v]) => `${k}=${v}`)
      .join("\n") + "\n",
  );
}

/**
 * Format a broker's storage for `clusterId` (kafka.tools.StorageTool, a 128m JVM).
 * `extraArgs`: e.g. `--add-scram 'SCRAM-SHA-512=[name=..,password=..]'` (kafka-auth.ts).
 */
export async function formatStorage(
  clusterId: string,
  propsPath: string,
  log4jPath: string,
  cds: "use" | "none" = "use",
  extraArgs: readonly string[] = [],
): Promise<void> {
  await runCommand(
    "java",
    [
      ...jvmArgs("128m", log4jPath, cds),
      "kafka.tools.StorageTool",
      "format",
      "-t",
      clusterId,
      "-c",
      propsPath,
      ...extraArgs,
    ],
    { timeoutMs: 60_000 },
  );
}
