// Turns the zod schemas of core/ (NodeFence spec/status, FencingPolicy spec, FencedNodeSet
// spec) into
// Kubernetes structural OpenAPI v3 schemas, so the CRDs in knative/base/crds can never
// drift from the domain model: a unit test compares the YAML with this output, and
// `crdSchemas()` regenerates it. Pure: no I/O.
import { z } from "zod";
import { NodeFenceSpecSchema, NodeFenceStatusSchema } from "./incident.ts";
import { FENCED_NODES, FencedNodeSetSpecSchema } from "./lease-handoff.ts";
import { FencingPolicySpecSchema } from "./policy.ts";

type Schema = Record<string, unknown>;
const SAFE = 9007199254740991;

/** JSON Schema (zod output) → structural schema (apiextensions.k8s.io/v1 rules). */
export function toStructural(js: Schema): Schema {
  const out: Schema = {};
  if (js.description) out.description = js.description;
  if ("const" in js) {
    out.type = typeof js.const === "number" ? "number" : "string";
    out.enum = [js.const];
    return out;
  }
  const type = js.type as string | undefined;
  if (type) out.type = type;
  if (js.enum) out.enum = js.enum;
  if (type === "string") {
    if (js.format === "date-time") out.format = "date-time";
    else if (typeof js.pattern === "string") out.pattern = js.pattern;
    if (typeof js.minLength === "number" && js.minLength > 0) out.minLength = js.minLength;
    if (typeof js.maxLength === "number") out.maxLength = js.maxLength;
  }
  if (type === "integer" || type === "number") {
    if (typeof js.minimum === "number" && Math.abs(js.minimum) < SAFE) out.minimum = js.minimum;
    if (typeof js.maximum === "number" && Math.abs(js.maximum) < SAFE) out.maximum = js.maximum;
  }
  if ("default" in js) out.default = js.default;
  if (typeof js.maxProperties === "number") out.maxProperties = js.maxProperties; // bounds CEL cost
  // CEL rules the API server checks (zod: .meta({ "x-kubernetes-validations": [...] })).
  if (Array.isArray(js["x-kubernetes-validations"]))
    out["x-kubernetes-validations"] = js["x-kubernetes-validations"];
  if (type === "array") {
    out.items = toStructural((js.items ?? {}) as Schema);
    if (typeof js.minItems === "number" && js.minItems > 0) out.minItems = js.minItems;
    if (typeof js.maxItems === "number") out.maxItems = js.maxItems; // bounds CEL cost
  }
  if (type === "object") {
    const props = js.properties as Record<string, Schema> | undefined;
    if (props && Object.keys(props).length > 0) {
      out.properties = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, toStructural(v)]));
      const req = (js.required as string[] | undefined)?.filter((r) => !("default" in (props[r] ?? {})));
      if (req && req.length > 0) out.required = req;
    } else if (js.additionalProperties && typeof js.additionalProperties === "object") {
      out.additionalProperties = toStructural(js.additionalProperties as Schema);
    }
  }
  return out;
}

function structural(schema: z.ZodType): Schema {
  return toStructural(
    z.toJSONSchema(schema, { target: "draft-7", io: "input", unrepresentable: "any" }) as Schema,
  );
}

/** The structural schemas the CRD YAML must carry. */
export function crdSchemas(): { nodeFenceSpec: Schema; nodeFenceStatus: Schema; fencingPolicySpec: Schema } {
  return {
    nodeFenceSpec: structural(NodeFenceSpecSchema),
    nodeFenceStatus: structural(NodeFenceStatusSchema),
    fencingPolicySpec: structural(FencingPolicySpecSchema),
  };
}

/** The NodeFence CustomResourceDefinition (knative/base/crds/nodefence.yaml). */
export function nodeFenceCrd(): Schema {
  const s = crdSchemas();
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "nodefences.fastfence.io" },
    spec: {
      group: "fastfence.io",
      scope: "Namespaced",
      names: {
        kind: "NodeFence",
        listKind: "NodeFenceList",
        plural: "nodefences",
        singular: "nodefence",
        shortNames: ["nf"],
        categories: ["fastfence"],
      },
      versions: [
        {
          name: "v1alpha1",
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Node", type: "string", jsonPath: ".spec.nodeName" },
            { name: "Phase", type: "string", jsonPath: ".status.phase" },
            { name: "Reason", type: "string", jsonPath: ".status.reason" },
            { name: "Round", type: "integer", jsonPath: ".status.round", priority: 1 },
            { name: "Confirmed", type: "date", jsonPath: ".status.timestamps.confirmed", priority: 1 },
            { name: "PowerOff", type: "date", jsonPath: ".status.powerOffConfirmedAt" },
            {
              name: "Released",
              type: "string",
              jsonPath: '.status.conditions[?(@.type=="Released")].status',
            },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: {
            openAPIV3Schema: {
              description:
                "One fencing incident: one node incarnation (boot ID), its phases, evidence and power-off attempts.",
              type: "object",
              required: ["spec"],
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: s.nodeFenceSpec,
                status: s.nodeFenceStatus,
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * The FencingPolicy's status, written by the functions (infra/kube/policy-status.ts), never
 * by the user: metav1.Condition-shaped `conditions` (type `Valid`: whether fastfence could
 * use the spec of `observedGeneration`), so `kubectl wait --for=condition=Valid` works.
 */
const FENCING_POLICY_STATUS: Schema = {
  type: "object",
  properties: {
    observedGeneration: { type: "integer" },
    message: { type: "string" },
    conditions: {
      type: "array",
      maxItems: 8,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      items: {
        type: "object",
        required: ["type", "status", "reason", "lastTransitionTime"],
        properties: {
          type: { type: "string", maxLength: 316 },
          status: { type: "string", enum: ["True", "False", "Unknown"] },
          reason: { type: "string", maxLength: 1024 },
          message: { type: "string", maxLength: 32768 },
          observedGeneration: { type: "integer", minimum: 0 },
          lastTransitionTime: { type: "string", format: "date-time" },
        },
      },
    },
  },
};

/** The FencingPolicy CustomResourceDefinition (knative/base/crds/fencingpolicy.yaml). */
export function fencingPolicyCrd(): Schema {
  const s = crdSchemas();
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "fencingpolicies.fastfence.io" },
    spec: {
      group: "fastfence.io",
      scope: "Cluster",
      names: {
        kind: "FencingPolicy",
        listKind: "FencingPolicyList",
        plural: "fencingpolicies",
        singular: "fencingpolicy",
        shortNames: ["fp"],
        categories: ["fastfence"],
      },
      versions: [
        {
          name: "v1alpha1",
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Quorum", type: "integer", jsonPath: ".spec.corroboration.quorum" },
            { name: "MaxFenced", type: "integer", jsonPath: ".spec.stormGuard.maxConcurrentFenced" },
            { name: "PowerOn", type: "boolean", jsonPath: ".spec.powerOnAfterFence" },
            { name: "Valid", type: "string", jsonPath: '.status.conditions[?(@.type=="Valid")].status' },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: {
            openAPIV3Schema: {
              description:
                "Cluster-wide fencing policy: detection, corroboration, storm guard, fencing levels, remediation.",
              type: "object",
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: { ...s.fencingPolicySpec, default: {} },
                status: FENCING_POLICY_STATUS,
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * The FencedNodeSet CustomResourceDefinition (knative/base/crds/fencednodeset.yaml): the
 * fenced-nodes list the Lease hand-off's admission policy reads as its param.
 */
export function fencedNodeSetCrd(): Schema {
  const { group, version, kind, plural } = FENCED_NODES;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: {
        kind,
        listKind: `${kind}List`,
        plural,
        singular: kind.toLowerCase(),
        categories: ["fastfence"],
      },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          additionalPrinterColumns: [{ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" }],
          schema: {
            openAPIV3Schema: {
              description:
                "The nodes fence has proven powered off (one per namespace, named fastfence-fenced-nodes): " +
                "the Lease hand-off admission policy's param. Written by fence only.",
              type: "object",
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: { ...structural(FencedNodeSetSpecSchema), default: {} },
              },
            },
          },
        },
      ],
    },
  };
}
