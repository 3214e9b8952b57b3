// An informer (list, then watch, of one collection) that does not stay on an API server
// that stopped delivering. A watch on a dead node's API server (or on one whose etcd client
// waits on a dead member) gets no error for tens of seconds: its connection is open and
// nothing comes. Each (re)start goes to the server a request would try first
// (Kube.preferredServer); a failed list or watch marks its server as a suspect, and so does
// a watch that was quiet for `quietMs` (for collections that change all the time, such as
// heartbeat Leases), which then moves to the next server at once. After a move the new
// listing is reconciled with what the listeners were told: an object gone in between gets
// its `delete`. Listeners never hear an event of a replaced watch. It decides nothing about
// the objects and never writes to the API.
import { makeInformer, type KubernetesListObject, type KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import type { Kube, KubeApis } from "./client.ts";

type Verb = "add" | "update" | "delete";
type ObjectCallback<T> = (obj: T) => void;

export interface FailoverInformerOptions<T extends KubernetesObject> {
  /** For log lines: what is watched, e.g. "heartbeats". */
  name: string;
  kube: Kube;
  /** The collection's path, e.g. /api/v1/nodes. */
  path: string;
  /** Lists the collection through a server's clients (Kube.read: hedged across servers). */
  list: (apis: KubeApis) => Promise<KubernetesListObject<T>>;
  /**
   * A listed watch with no event for this long moves to another server, ms. Only for
   * collections that change several times in this period when healthy; a watch that stays
   * quiet waits twice as long before each further move, up to 4× this. Unset: never.
   */
  quietMs?: number | (() => number);
  /** Monotonic ms. Default performance.now. */
  mono?: () => number;
  log: Logger;
}

const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

export class FailoverInformer<T extends KubernetesObject> {
  private readonly o: FailoverInformerOptions<T>;
  private readonly mono: () => number;
  private readonly listeners = { add: [], update: [], delete: [], error: [], listed: [], moved: [] } as {
    add: ObjectCallback<T>[];
    update: ObjectCallback<T>[];
    delete: ObjectCallback<T>[];
    error: ((err: unknown) => void)[];
    listed: (() => void)[];
    moved: ((from: string | undefined, reason: string) => void)[];
  };
  /** What the listeners were told exists, by namespace/name. */
  private readonly known = new Map<string, T>();
  private current: { gen: number; server: string; stop: () => Promise<void> } | undefined;
  private gen = 0;
  private listed = false;
  private lastEventAt = 0;
  private quietMoves = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(o: FailoverInformerOptions<T>) {
    this.o = o;
    this.mono = o.mono ?? (() => performance.now());
  }

  on(verb: Verb, cb: ObjectCallback<T>): void;
  on(verb: "error", cb: (err: unknown) => void): void;
  /** Each time a (re)start has listed, after the listing's events and deletes. */
  on(verb: "listed", cb: () => void): void;
  /** Each time the watch leaves a server (moveOn or quiet), before it lists on the next. */
  on(verb: "moved", cb: (from: string | undefined, reason: string) => void): void;
  on(
    verb: Verb | "error" | "listed" | "moved",
    cb: ObjectCallback<T> | ((err: unknown) => void) | ((from: string | undefined, reason: string) => void),
  ): void {
    (this.listeners[verb] as unknown[]).push(cb);
  }

  /** What is watched (the options' name). */
  get name(): string {
    return this.o.name;
  }

  /** The server the watch is on (undefined before the first start). */
  get server(): string | undefined {
    return this.current?.server;
  }

  /**
   * (Re)starts on the preferred server, replacing a running watch; resolves once listed
   * (not when the watch connects: a connect can hang for as long as a watch can be quiet).
   * True once listed (the `listed` listeners heard of it first); false: the list failed
   * (the `error` listeners heard of it) or the watch was replaced or stopped meanwhile.
   */
  async start(): Promise<boolean> {
    if (this.stopped) return false;
    await this.replace();
    if (this.stopped) return false; // stop() came while the old watch stopped
    // Another start() that ran while this one waited is replaced too: one watch at a time.
    const other = this.current;
    if (other) void other.stop().catch(() => undefined);
    const gen = ++this.gen;
    const server = this.o.kube.preferredServer();
    const mine = () => gen === this.gen && !this.stopped;
    let listed!: (ok: boolean) => void;
    const listing = new Promise<boolean>((resolve) => (listed = resolve));
    // The informer adds the listed items right after this promise settles; setImmediate
    // runs after that, so the listing is complete in its cache by then.
    // The list is a hedged read (any server: resourceVersions are the cluster's), the watch
    // goes to `server`.
    const list = () =>
      this.o.kube.read(`list ${this.o.name}`, this.o.list).then((r) => {
        setImmediate(() => listed(true));
        return r;
      });
    const inf = makeInformer<T>(this.o.kube.kubeConfigAt(server), this.o.path, list);
    for (const verb of ["add", "update"] as const)
      inf.on(verb, (obj) => {
        if (!mine()) return;
        this.sawEvent();
        const key = keyOf(obj);
        // A relist after a move adds what the listeners already know: to them it is an update.
        const heard = this.known.has(key) ? "update" : "add";
        this.known.set(key, obj);
        for (const cb of this.listeners[heard]) cb(obj);
      });
    inf.on("delete", (obj) => {
      if (!mine()) return;
      this.sawEvent();
      this.known.delete(keyOf(obj));
      for (const cb of this.listeners.delete) cb(obj);
    });
    inf.on("error", (err: unknown) => {
      listed(false);
      if (!mine()) return;
      this.listed = false;
      this.o.kube.demote(server);
      for (const cb of this.listeners.error) cb(err);
    });
    this.current = { gen, server, stop: () => inf.stop() };
    inf.start().catch(() => listed(false));
    if (!(await listing) || !mine()) return false;
    this.reconcile(new Set(inf.list().map(keyOf)));
    this.listed = true;
    this.lastEventAt = this.mono();
    this.armQuietCheck();
    for (const cb of this.listeners.listed) cb();
    return true;
  }

  /** Moves the watch to another server now (its server becomes a suspect); as start(). */
  moveOn(reason: string): Promise<boolean> {
    return this.move(reason, "warn");
  }

  private async move(reason: string, level: "warn" | "debug"): Promise<boolean> {
    if (this.stopped) return false;
    const from = this.current?.server;
    if (from) this.o.kube.demote(from);
    this.o.log[level](
      { incident: "none", node: "none", informer: this.o.name, from, reason },
      "watch moves to another API server",
    );
    for (const cb of this.listeners.moved) cb(from, reason);
    return this.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.replace();
  }

  private async replace(): Promise<void> {
    const prev = this.current;
    this.current = undefined;
    this.listed = false;
    this.gen++;
    if (prev) await prev.stop().catch(() => undefined);
  }

  /** A listed watch's event resets the quiet moves' backoff; a listing's does not. */
  private sawEvent(): void {
    this.lastEventAt = this.mono();
    if (this.listed) this.quietMoves = 0;
  }

  /** Objects the listeners know that the new listing lacks were deleted in between. */
  private reconcile(listedKeys: ReadonlySet<string>): void {
    for (const [key, obj] of [...this.known]) {
      if (listedKeys.has(key)) continue;
      this.known.delete(key);
      for (const cb of this.listeners.delete) cb(obj);
    }
  }

  private armQuietCheck(): void {
    const setting = this.o.quietMs;
    if (setting === undefined || this.stopped) return;
    const quietMs = typeof setting === "function" ? setting() : setting;
    if (this.timer) clearTimeout(this.timer);
    const check = () => {
      this.timer = undefined;
      if (this.stopped) return;
      const limit = quietMs * Math.min(4, 2 ** this.quietMoves);
      const quietFor = this.mono() - this.lastEventAt;
      if (this.listed && quietFor >= limit) {
        // The first quiet move is news; one after another (nothing changes here) is not.
        this.quietMoves++;
        void this.move(`no event for ${Math.round(quietFor)} ms`, this.quietMoves > 1 ? "debug" : "warn");
        return; // start() arms the next check once listed
      }
      this.timer = setTimeout(check, Math.max(50, Math.min(quietMs / 4, limit - quietFor)));
      this.timer.unref?.();
    };
    this.timer = setTimeout(check, quietMs / 4);
    this.timer.unref?.();
  }
}
