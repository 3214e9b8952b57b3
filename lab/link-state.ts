// Whether a lab node's link (its host-side veth) is up, from two independent causes: the
// machine is "dark" (crashed silently, reset by its watchdog, lost its power, or powered
// off: a machine not running answers nothing, no TCP reset, no ICMP) or the network cut it
// off (partition, isolate). Power-on ends the dark, heal ends the cut; the link is up only
// when neither holds, so a heal never lights a dead machine and a power-on never mends a
// cut cable. Pure: no I/O; lab/faults.ts applies the answer.

export interface LinkFlags {
  /** The machine is not running: its link stays down until it is powered on. */
  dark: boolean;
  /** The network cut it off (partition, isolate) until a heal. */
  cut: boolean;
}

/**
 * What changes the link: a silent crash (crash, watchdog-reset, power-loss) and a power-off
 * darken the machine, a power-on lights it; a partition cuts, a heal mends. A proc-crash,
 * hang or partial partition leaves the link alone.
 */
export type LinkEvent = "crash" | "power-off" | "power-on" | "partition" | "heal";

/** A node as the lab builds it: running, connected. */
export const LINK_UP: LinkFlags = { dark: false, cut: false };

export function linkAfter(f: LinkFlags, e: LinkEvent): LinkFlags {
  switch (e) {
    case "crash":
    case "power-off":
      return { ...f, dark: true };
    case "power-on":
      return { ...f, dark: false };
    case "partition":
      return { ...f, cut: true };
    case "heal":
      return { ...f, cut: false };
  }
}

/** The link is up only when the machine runs and nothing cut it off. */
export const linkUp = (f: LinkFlags): boolean => !f.dark && !f.cut;

/** For `lab status`: "up", or "down" with why (dark: not running; cut: partitioned). */
export function describeLink(f: LinkFlags | undefined): string {
  if (!f || linkUp(f)) return "up";
  return `down (${[f.dark ? "dark" : "", f.cut ? "cut" : ""].filter(Boolean).join(", ")})`;
}
