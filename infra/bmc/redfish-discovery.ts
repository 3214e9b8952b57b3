// Redfish discovery, the reading half: from the JSON the BMC returned, where the service
// root links its sessions and Systems, which system a one-member Systems collection names,
// and a ComputerSystem's #ComputerSystem.Reset target with its allowed ResetTypes. Pure:
// no I/O and no credentials; the driver (redfish.ts) makes the requests in between and
// caches the result. Anything missing is a typed error naming what the BMC lacks.
import { BmcProtocolError, BmcUnsupportedError } from "./driver.ts";

/** What the driver needs to know about the BMC, found once and then cached. */
export interface Discovery {
  systemPath: string;
  resetTarget: string;
  /** ResetType@Redfish.AllowableValues, when the BMC lists them. */
  allowed: string[] | undefined;
  sessionsPath: string | undefined;
}

/** An "@odata.id" link, if `o` is one. */
export function odataLink(o: unknown): string | undefined {
  const id = (o as { "@odata.id"?: unknown } | undefined)?.["@odata.id"];
  return typeof id === "string" ? id : undefined;
}

/** The service root as an object, or a protocol error when it is not JSON. */
export function serviceRoot(body: unknown, target: string): Record<string, unknown> {
  const root = body as Record<string, unknown>;
  if (!root || typeof root !== "object") throw new BmcProtocolError(target, "service root is not JSON");
  return root;
}

/** The sessions collection the root links (Links.Sessions, else SessionService + /Sessions). */
export function sessionsPathOf(root: Record<string, unknown>): string | undefined {
  return (
    odataLink((root.Links as Record<string, unknown> | undefined)?.Sessions) ??
    (odataLink(root.SessionService)
      ? `${odataLink(root.SessionService)!.replace(/\/$/, "")}/Sessions`
      : undefined)
  );
}

/** The Systems collection the root links. */
export function systemsPathOf(root: Record<string, unknown>, target: string): string {
  const systems = odataLink(root.Systems);
  if (!systems) throw new BmcUnsupportedError(target, "service root has no Systems collection");
  return systems;
}

/** The one system of a Systems collection; several (or none) need a configured system id. */
export function onlySystemOf(collection: unknown, target: string): string {
  const coll = collection as { Members?: unknown[] };
  const members = (coll?.Members ?? []).map(odataLink).filter((x): x is string => !!x);
  if (members.length !== 1) {
    throw new BmcUnsupportedError(
      target,
      `Systems collection has ${members.length} members; configure the system id`,
    );
  }
  return members[0]!;
}

/** A ComputerSystem's reset action: its target and allowed ResetTypes (undefined: not listed). */
export function resetActionOf(
  system: unknown,
  systemPath: string,
  target: string,
): { resetTarget: string; allowed: string[] | undefined } {
  const sys = system as Record<string, unknown>;
  const action = (sys?.Actions as Record<string, unknown> | undefined)?.["#ComputerSystem.Reset"] as
    Record<string, unknown> | undefined;
  const resetTarget = action?.target;
  if (typeof resetTarget !== "string") {
    throw new BmcUnsupportedError(target, `${systemPath} has no #ComputerSystem.Reset action`);
  }
  const allowedRaw = action?.["ResetType@Redfish.AllowableValues"];
  const allowed = Array.isArray(allowedRaw)
    ? allowedRaw.filter((x): x is string => typeof x === "string")
    : undefined;
  return { resetTarget, allowed };
}
