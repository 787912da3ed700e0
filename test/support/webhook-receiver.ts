import http from 'node:http';
import type { Socket } from 'node:net';
import { waitFor } from './harness.js';

/**
 * A real HTTP receiver on loopback for webhook tests: records every request (path, headers,
 * body, arrival time) and answers as its current `behaviour` says — a status, a delay, a hang
 * (no answer, ever), an endless body, a redirect. Keep-alive like a real server.
 */

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Arrival (wall clock, ms with fractions). */
  at: number;
  webhookId: string;
  /** The client's port: one per connection, so keep-alive shows as few distinct ports. */
  remotePort: number;
}

export type Reply =
  | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number }
  | { hang: true }
  | { status: number; endless: true }
  /** Headers at once, then one byte of body every 50 ms, forever (a slowloris). */
  | { status: number; trickle: true };

export type Behaviour = (req: Received, n: number) => Reply;

export const ok: Behaviour = () => ({ status: 200, body: 'ok' });

export class WebhookReceiver {
  readonly requests: Received[] = [];
  behaviour: Behaviour;
  readonly #timers = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
    behaviour: Behaviour,
    private readonly sockets: Set<Socket>,
  ) {
    this.behaviour = behaviour;
  }

  static async start(behaviour: Behaviour = ok, port = 0): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | null = null;
    const sockets = new Set<Socket>();
    const server = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => receiver?.handle(req, res));
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    const address = server.address();
    receiver = new WebhookReceiver(server, typeof address === 'object' && address !== null ? address.port : 0, behaviour, sockets);
    return receiver;
  }

  url(path = '/hooks/mailjet'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Requests whose path starts with `path`. */
  at(path: string): Received[] {
    return this.requests.filter((r) => r.path.startsWith(path));
  }

  /** Distinct webhook ids received (at `path`, if given). */
  ids(path?: string): Set<string> {
    return new Set((path === undefined ? this.requests : this.at(path)).map((r) => r.webhookId));
  }

  async waitForIds(n: number, path?: string, timeoutMs = 30_000): Promise<void> {
    await waitFor(`${n} distinct webhook ids at the receiver${path !== undefined ? ` (${path})` : ''}`, async () => this.ids(path).size >= n, timeoutMs, 20);
  }

  async waitForRequests(n: number, timeoutMs = 30_000): Promise<void> {
    await waitFor(`${n} requests at the receiver`, async () => this.requests.length >= n, timeoutMs, 20);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: Received = {
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: performance.timeOrigin + performance.now(),
        webhookId: String(req.headers['webhook-id'] ?? ''),
        remotePort: req.socket.remotePort ?? 0,
      };
      this.requests.push(received);
      const reply = this.behaviour(received, this.requests.length);
      if ('hang' in reply) return;
      if ('trickle' in reply) {
        res.writeHead(reply.status, { 'content-type': 'text/plain' });
        const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write('x')), 50);
        this.#timers.add(t);
        return;
      }
      if ('endless' in reply) {
        res.writeHead(reply.status, { 'content-type': 'text/plain' });
        const chunk = Buffer.alloc(16 * 1024, 'x');
        const pump = () => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', pump);
        };
        pump();
        return;
      }
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
        res.end(reply.body ?? '');
      };
      if (reply.delayMs !== undefined && reply.delayMs > 0) {
        const t = setTimeout(() => {
          this.#timers.delete(t);
          send();
        }, reply.delayMs);
        this.#timers.add(t);
      } else send();
    });
  }

  async close(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
