import net from 'node:net';

/**
 * A TCP proxy in front of a real server, to take it "down" for one client without touching the
 * server (other test files share it): `cut()` drops every connection and refuses new ones,
 * `restore()` lets them through again; `freeze()` makes it stop answering instead (a host gone
 * from the network), `thaw()` resets what it froze and lets new connections through.
 */
export class TcpProxy {
  #server: net.Server | null = null;
  readonly #sockets = new Set<net.Socket>();
  #port = 0;
  #frozen = false;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  get port(): number {
    return this.#port;
  }

  async start(port = 0): Promise<number> {
    const server = net.createServer((client) => {
      if (this.#frozen) {
        // Accepted and never answered.
        this.#sockets.add(client);
        client.on('close', () => this.#sockets.delete(client));
        client.on('error', () => client.destroy());
        client.pause();
        return;
      }
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.#server = server;
    this.#port = (server.address() as net.AddressInfo).port;
    return this.#port;
  }

  /** The server is "down": open connections reset, new ones refused. */
  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Nothing gets through either way any more, and new connections are accepted and never answered. */
  freeze(): void {
    this.#frozen = true;
    for (const s of this.#sockets) {
      s.unpipe();
      s.pause();
    }
  }

  /** The frozen connections reset; new ones go through again. */
  thaw(): void {
    this.#frozen = false;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  async restore(): Promise<void> {
    await this.start(this.#port);
  }

  async stop(): Promise<void> {
    await this.cut();
  }
}

/** A started proxy in front of the Postgres of `databaseUrl`, and that URL through it. */
export async function postgresBehindProxy(databaseUrl: string): Promise<{ proxy: TcpProxy; url: URL }> {
  const pgUrl = new URL(databaseUrl);
  const proxy = new TcpProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
  await proxy.start();
  const url = new URL(pgUrl);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return { proxy, url };
}
