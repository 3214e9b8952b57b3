// A loopback TCP relay that can be cut: the connections of one simulated node to a server
// (the kube-apiserver) go through it, and `cut()` drops every open connection and refuses
// new ones — what a node's death looks like from the server's side, without touching the
// processes. Byte-for-byte: TLS passes through unchanged. Harness code for the integration
// tests; it listens on 127.0.0.1 only and never connects anywhere but its target.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export class CuttableRelay {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private cutOff = false;
  port = 0;

  private constructor(target: { host: string; port: number }) {
    this.server = createServer((client) => {
      if (this.cutOff) return void client.destroy();
      const upstream = createConnection(target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => undefined);
      }
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
  }

  /** Starts a relay on a free loopback port towards `target`. */
  static async start(target: { host: string; port: number }): Promise<CuttableRelay> {
    const r = new CuttableRelay(target);
    await new Promise<void>((resolve, reject) => {
      r.server.once("error", reject);
      r.server.listen(0, "127.0.0.1", () => resolve());
    });
    r.port = (r.server.address() as { port: number }).port;
    return r;
  }

  /** Drops every open connection and refuses new ones until `heal`. */
  cut(): void {
    this.cutOff = true;
    for (const s of this.sockets) s.destroy();
  }

  heal(): void {
    this.cutOff = false;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
