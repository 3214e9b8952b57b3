// The peers' figures the bench chart shows beside fastfence as stated references: not
// measured by the bench, quoted with their source (docs/lab.md, "Peers", says where each
// comes from). The Kubernetes-only baseline is not here: the bench measures it in the
// same run (bench/lab.ts --baseline). Data only.

export interface StatedReference {
  /** Stable id (the SVG row's data-reference). */
  id: string;
  /** Who: the stack and its setting. */
  peer: string;
  /** What the figure times, from the node's failure. */
  what: string;
  loMs: number;
  hiMs: number;
  /** The figure as stated ("13.1–13.5 s"). */
  stated: string;
  /** Where it comes from: a footnote of STATED_SOURCES. */
  source: 1 | 2;
}

const LAB_SHAPE = 1;
const CUSTOMER = 2;

export const STATED_REFERENCES: readonly StatedReference[] = [
  {
    id: "pacemaker-tuned",
    peer: "Pacemaker, Corosync token 1 s",
    what: "power-off",
    loMs: 6_500,
    hiMs: 7_900,
    stated: "6.5–7.9 s",
    source: LAB_SHAPE,
  },
  {
    id: "pacemaker",
    peer: "Pacemaker + fence_ipmilan, defaults",
    what: "resource running elsewhere",
    loMs: 13_100,
    hiMs: 13_500,
    stated: "13.1–13.5 s",
    source: LAB_SHAPE,
  },
  {
    id: "nhc-far-tuned",
    peer: "NodeHealthCheck + FAR, tuned",
    what: "the node's pods gone",
    loMs: 55_000,
    hiMs: 65_000,
    stated: "55–65 s",
    source: LAB_SHAPE,
  },
  {
    id: "nhc-far",
    peer: "NodeHealthCheck + FAR, defaults",
    what: "workloads restartable",
    loMs: 360_000,
    hiMs: 420_000,
    stated: "6–7 min",
    source: CUSTOMER,
  },
  {
    id: "mhc-metal3",
    peer: "OpenShift MHC + metal3",
    what: "workloads restartable",
    loMs: 420_000,
    hiMs: 480_000,
    stated: "7–8 min",
    source: CUSTOMER,
  },
];

/** The footnotes of a chart that shows them ([n] in a row's note), and where they are explained. */
export const STATED_SOURCES = [
  "Hatched bars are stated references, not measured by this bench.",
  "[1] Measured on this 3-node lab shape: Pacemaker 2.1.5 + Corosync 3.1.7 + fence_ipmilan after a node " +
    "hangs; NodeHealthCheck v0.12 + Fence Agents Remediation v0.7 expertly tuned (1 s unhealthy duration, " +
    "off, out-of-service taint).",
  "[2] As the customer measured them: NodeHealthCheck + Fence Agents Remediation with its defaults (300 s " +
    "unhealthy duration) and OpenShift MachineHealthCheck external-baremetal + metal3.",
  "Sources: the Peers section of docs/lab.md.",
];
