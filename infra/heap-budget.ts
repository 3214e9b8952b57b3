// The memory rule of every shipped fastfence container (docs/tuning.md "Memory: the V8 heap
// below the container's limit"): V8's heap limit, old space (--max-old-space-size) plus the
// young generation (3 × --max-semi-space-size), stays below the container's memory limit by
// the native headroom, max(128 MiB, 25 % of the limit). Node's RSS is that heap plus what
// lives outside it (code, the TypeScript type stripper, sockets, TLS, Buffers): measured
// 102–105 MiB at rest for the event source's and the stages' modules on Node 24. V8 sizes
// its garbage collection by its own limit, so a limit above the container's lets the heap
// grow, uncollected, into the OOM killer; and an OOM kill of the event source while it has
// the node's watchdog armed resets the node. Both flags must be explicit: without
// --max-semi-space-size Node 24 sizes the young generation from the host's memory (3 × 64
// MiB measured), not the container's. Pure: parses strings, never reads the process.

/** The headroom left for memory outside the V8 heap: max(minMiB, fraction × limit). */
export const NATIVE_HEADROOM = { minMiB: 128, fraction: 0.25 } as const;

/** V8's young generation is this many semi-spaces (V8 12–13, measured with heap_size_limit). */
export const SEMI_SPACES_PER_YOUNG_GENERATION = 3;

const UNITS: Record<string, number> = {
  "": 1 / 2 ** 20,
  k: 1000 / 2 ** 20,
  M: 1e6 / 2 ** 20,
  G: 1e9 / 2 ** 20,
  Ki: 1 / 1024,
  Mi: 1,
  Gi: 1024,
};

/** A Kubernetes memory quantity (e.g. "256Mi", "1G", "268435456") in MiB; undefined if unreadable. */
export function memoryQuantityMiB(q: string | undefined): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)(k|M|G|Ki|Mi|Gi)?$/.exec((q ?? "").trim());
  if (!m) return undefined;
  return Number(m[1]) * UNITS[m[2] ?? ""]!;
}

/** The headroom a container with this memory limit keeps outside the V8 heap, MiB. */
export function nativeHeadroomMiB(limitMiB: number): number {
  return Math.max(NATIVE_HEADROOM.minMiB, NATIVE_HEADROOM.fraction * limitMiB);
}

export interface V8HeapFlags {
  oldSpaceMiB: number;
  semiSpaceMiB: number;
  /** oldSpaceMiB + 3 × semiSpaceMiB: V8's heap_size_limit. */
  heapMiB: number;
}

/** The heap flags of a NODE_OPTIONS value; the names of the missing ones otherwise. */
export function v8HeapFlags(nodeOptions: string | undefined): V8HeapFlags | { missing: string[] } {
  const flag = (name: string) => {
    const m = new RegExp(`(?:^|\\s)--${name}[=\\s]([0-9]+)(?=\\s|$)`).exec(nodeOptions ?? "");
    return m ? Number(m[1]) : undefined;
  };
  const old = flag("max-old-space-size");
  const semi = flag("max-semi-space-size");
  if (old === undefined || semi === undefined)
    return {
      missing: [
        ...(old === undefined ? ["--max-old-space-size"] : []),
        ...(semi === undefined ? ["--max-semi-space-size"] : []),
      ],
    };
  return { oldSpaceMiB: old, semiSpaceMiB: semi, heapMiB: old + SEMI_SPACES_PER_YOUNG_GENERATION * semi };
}

/**
 * What is wrong with a container's heap settings under the rule, or undefined when they
 * keep it: a memory limit, both heap flags in NODE_OPTIONS, and heap ≤ limit − headroom.
 */
export function heapBudgetProblem(c: { memoryLimit?: string; nodeOptions?: string }): string | undefined {
  const limit = memoryQuantityMiB(c.memoryLimit);
  if (limit === undefined)
    return c.memoryLimit === undefined
      ? "no memory limit"
      : `memory limit ${JSON.stringify(c.memoryLimit)} is not a quantity`;
  if (c.nodeOptions === undefined) return "no NODE_OPTIONS (the V8 heap limit must be set in the manifest)";
  const flags = v8HeapFlags(c.nodeOptions);
  if ("missing" in flags) return `NODE_OPTIONS lacks ${flags.missing.join(" and ")}`;
  const budget = limit - nativeHeadroomMiB(limit);
  if (flags.heapMiB > budget)
    return `V8 heap ${flags.oldSpaceMiB} + ${SEMI_SPACES_PER_YOUNG_GENERATION} × ${flags.semiSpaceMiB} = ${flags.heapMiB} MiB exceeds memory limit ${c.memoryLimit} − headroom ${nativeHeadroomMiB(limit)} MiB = ${budget} MiB`;
  return undefined;
}
