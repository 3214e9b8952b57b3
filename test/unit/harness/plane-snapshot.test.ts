// The shared control plane's comparison of a listing with its snapshot
// (harness/env/plane-snapshot.ts): new objects are extra, snapshot objects with other
// content are changed and absent ones missing; a new resourceVersion with the snapshot's
// content (an object put back) is not a change, and the objects the API server rewrites by
// itself are left out.
import { describe, expect, it } from "vitest";
import type { ApiResource, StoredObject } from "../../../harness/env/api-inventory.ts";
import { diffPlane, isClean, type PlaneSnapshot } from "../../../harness/env/plane-snapshot.ts";

const configmaps: ApiResource = {
  group: "",
  version: "v1",
  versions: ["v1"],
  resource: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
  hasStatus: false,
};
const leases: ApiResource = {
  ...configmaps,
  group: "coordination.k8s.io",
  resource: "leases",
  kind: "Lease",
};

function obj(
  res: ApiResource,
  name: string,
  rv: string,
  extra: { data?: Record<string, string>; labels?: Record<string, string>; namespace?: string } = {},
): StoredObject {
  const namespace = extra.namespace ?? "default";
  return {
    res,
    namespace,
    name,
    body: {
      apiVersion: res.group ? `${res.group}/v1` : "v1",
      kind: res.kind,
      metadata: {
        name,
        namespace,
        resourceVersion: rv,
        uid: `uid-${name}-${rv}`,
        ...(extra.labels ? { labels: extra.labels } : {}),
      },
      ...(extra.data ? { data: extra.data } : {}),
    },
  };
}

const snap = (objects: StoredObject[]): PlaneSnapshot => ({ takenAt: "2026-12-06T00:00:00Z", objects });

describe("diffPlane", () => {
  const a = obj(configmaps, "a", "10", { data: { k: "1" } });
  const b = obj(configmaps, "b", "11", { data: { k: "2" } });

  it("is clean for the same listing", () => {
    expect(isClean(diffPlane(snap([a, b]), [a, b]))).toBe(true);
  });

  it("finds what is new, changed and gone", () => {
    const c = obj(configmaps, "c", "20");
    const changedA = obj(configmaps, "a", "21", { data: { k: "other" } });
    const d = diffPlane(snap([a, b]), [changedA, c]);
    expect(d.extra.map((o) => o.name)).toEqual(["c"]);
    expect(
      d.changed.map((x) => [x.want.body.metadata.resourceVersion, x.have.body.metadata.resourceVersion]),
    ).toEqual([["10", "21"]]);
    expect(d.missing.map((o) => o.name)).toEqual(["b"]);
  });

  it("a new resourceVersion and uid with the snapshot's content is no change (an object put back)", () => {
    const putBack = obj(configmaps, "a", "30", { data: { k: "1" } });
    expect(isClean(diffPlane(snap([a]), [putBack]))).toBe(true);
  });

  it("the same name in another namespace or group is another object", () => {
    const d = diffPlane(snap([a]), [
      obj(configmaps, "a", "10", { data: { k: "1" }, namespace: "x" }),
      obj(leases, "a", "10"),
    ]);
    expect(d.extra).toHaveLength(2);
    expect(d.missing).toHaveLength(1);
  });

  it("leaves out the API server's identity Lease and CRD APIServices, new, changed or gone", () => {
    const identity = (rv: string, name = "apiserver-abc") =>
      obj(leases, name, rv, {
        namespace: "kube-system",
        labels: { "apiserver.kubernetes.io/identity": "kube-apiserver" },
      });
    const apiservices: ApiResource = {
      ...configmaps,
      group: "apiregistration.k8s.io",
      resource: "apiservices",
      kind: "APIService",
      namespaced: false,
    };
    const crdService = obj(apiservices, "v1.reset.example.com", "5", {
      labels: { "kube-aggregator.kubernetes.io/automanaged": "true" },
    });
    expect(isClean(diffPlane(snap([identity("1")]), [identity("2")]))).toBe(true);
    expect(isClean(diffPlane(snap([identity("1")]), [identity("2", "apiserver-def")]))).toBe(true);
    expect(isClean(diffPlane(snap([]), [crdService]))).toBe(true);
    // a built-in group's APIService ("onstart") is compared
    const builtIn = obj(apiservices, "v1.apps", "6", {
      labels: { "kube-aggregator.kubernetes.io/automanaged": "onstart" },
    });
    expect(diffPlane(snap([builtIn]), []).missing).toHaveLength(1);
  });
});
