// The UDP side of one IPMI session: a socket to one BMC and the request/reply exchange
// every IPMI step uses — send a datagram, wait for the reply a matcher accepts (ignoring
// malformed or foreign datagrams), retransmit with exponential backoff until answered, the
// caller's signal fires, or (noReplyMs) the BMC has sent nothing at all since the first
// send. Also the session layer's internal failure type. Knows no message, key or
// credential: it moves bytes the session (session.ts, handshake.ts) built and shows them
// only to the packet hook (what is on the wire, where no password is).
import dgram from "node:dgram";

export type IpmiFailureKind = "auth" | "no-reply" | "unsupported" | "protocol" | "aborted" | "unreachable";

/** Internal failure; the driver maps `kind` to the typed BMC errors. */
export class IpmiSessionError extends Error {
  readonly kind: IpmiFailureKind;
  constructor(kind: IpmiFailureKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

export interface IpmiTransportOptions {
  host: string;
  port: number;
  /** First retransmit after this many ms, doubling up to maxRetryMs. */
  firstRetryMs?: number;
  maxRetryMs?: number;
  /**
   * Ends an exchange with "no-reply" when not one datagram has come back from the BMC this
   * long after the transport's first send (undefined: wait for the caller's signal). A BMC
   * that lost its power or its network answers nothing, while a live one answers its first
   * datagram in milliseconds; so a dead BMC is known in this time instead of the caller's
   * whole budget, and the round moves on to its next level. Once anything came back, only
   * the caller's signal ends an exchange.
   */
  noReplyMs?: number;
  /** Sees every datagram (for recorded fixtures and debugging). */
  onPacket?: (dir: "tx" | "rx", pkt: Buffer) => void;
}

export class IpmiTransport {
  private readonly opts: IpmiTransportOptions;
  private readonly socket: dgram.Socket;
  private waiter: ((pkt: Buffer) => void) | undefined;
  private socketError: NodeJS.ErrnoException | undefined;
  private closed = false;
  /** Whether any datagram came back on this socket. */
  private heard = false;
  /** When the first datagram was sent (ms since epoch). */
  private firstSentAt: number | undefined;

  constructor(opts: IpmiTransportOptions) {
    this.opts = opts;
    this.socket = dgram.createSocket(opts.host.includes(":") ? "udp6" : "udp4");
    this.socket.on("message", (pkt) => {
      this.heard = true;
      this.opts.onPacket?.("rx", pkt);
      this.waiter?.(pkt);
    });
    this.socket.on("error", (err: NodeJS.ErrnoException) => {
      this.socketError = err;
    });
    this.socket.unref();
  }

  /**
   * Sends `build(attempt)` until `match` accepts a reply; retransmits with backoff. A
   * matcher that throws an IpmiSessionError ends the exchange with it; any other throw
   * means a malformed or foreign datagram, which is ignored.
   */
  exchange<T>(
    build: (attempt: number) => Buffer,
    match: (pkt: Buffer) => T | undefined,
    signal: AbortSignal,
  ): Promise<T> {
    if (this.closed) return Promise.reject(new IpmiSessionError("protocol", "session closed"));
    return new Promise<T>((resolve, reject) => {
      let attempt = 0;
      let timer: NodeJS.Timeout | undefined;
      let silence: NodeJS.Timeout | undefined;
      let delay = this.opts.firstRetryMs ?? 200;
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        clearTimeout(silence);
        this.waiter = undefined;
        signal.removeEventListener("abort", onAbort);
        fn();
      };
      const onAbort = () => finish(() => reject(new IpmiSessionError("aborted", "aborted")));
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiter = (pkt) => {
        let r: T | undefined;
        try {
          r = match(pkt);
        } catch (err) {
          if (err instanceof IpmiSessionError) return finish(() => reject(err));
          return; // a malformed or foreign datagram: keep waiting
        }
        if (r !== undefined) finish(() => resolve(r as T));
      };
      const send = () => {
        if (this.socketError?.code === "ECONNREFUSED") {
          return finish(() => reject(new IpmiSessionError("unreachable", "port unreachable")));
        }
        this.firstSentAt ??= Date.now();
        const pkt = build(attempt++);
        this.opts.onPacket?.("tx", pkt);
        this.socket.send(pkt, this.opts.port, this.opts.host, (err) => {
          if (err) this.socketError = err as NodeJS.ErrnoException;
        });
        timer = setTimeout(send, delay);
        delay = Math.min(delay * 2, this.opts.maxRetryMs ?? 1000);
      };
      send();
      const noReplyMs = this.opts.noReplyMs;
      if (noReplyMs !== undefined && !this.heard) {
        const left = Math.max(0, (this.firstSentAt ?? Date.now()) + noReplyMs - Date.now());
        silence = setTimeout(() => {
          if (!this.heard)
            finish(() =>
              reject(new IpmiSessionError("no-reply", `no datagram from the BMC within ${noReplyMs} ms`)),
            );
        }, left);
      }
    });
  }

  /** Refuses further exchanges and closes the socket. */
  close(): void {
    this.closed = true;
    try {
      this.socket.close();
    } catch {
      // already closed
    }
  }
}
