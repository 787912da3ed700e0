import http from 'node:http';

/**
 * The benchmark's webhook receiver, a child process: keep-alive HTTP on loopback answering 200
 * at once (paths under /slow/ answer after SLOW_MS). It counts requests and the events in them
 * and remembers when each webhook id first arrived. Driven over IPC: `reset`, `report`.
 */

export interface ReceiverReport {
  requests: number;
  events: number;
  /** Distinct webhook ids. */
  unique: number;
  duplicates: number;
  firstAt: number;
  lastAt: number;
  /** webhook id → first arrival (ms since the epoch, with fractions), when asked for. */
  arrivals?: [string, number][];
}

const SLOW_MS = Number(process.env['SLOW_MS'] ?? '5000');
const EVENT_MARK = '{"event":';

let requests = 0;
let events = 0;
let duplicates = 0;
let firstAt = 0;
let lastAt = 0;
const seen = new Map<string, number>();

const now = () => performance.timeOrigin + performance.now();

function countEvents(body: string): number {
  let n = 0;
  for (let i = body.indexOf(EVENT_MARK); i >= 0; i = body.indexOf(EVENT_MARK, i + 1)) n += 1;
  return n;
}

const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    const at = now();
    const slow = req.url?.startsWith('/slow/') === true;
    if (!slow) {
      requests += 1;
      events += countEvents(body);
      if (firstAt === 0) firstAt = at;
      lastAt = at;
      const id = String(req.headers['webhook-id'] ?? `anon-${requests}`);
      if (seen.has(id)) duplicates += 1;
      else seen.set(id, at);
    }
    const answer = () => {
      res.writeHead(200, { 'content-length': '0' });
      res.end();
    };
    if (slow) setTimeout(answer, SLOW_MS);
    else answer();
  });
});
server.keepAliveTimeout = 60_000;

process.on('message', (msg: { cmd: string; arrivals?: boolean }) => {
  if (msg.cmd === 'reset') {
    requests = events = duplicates = firstAt = lastAt = 0;
    seen.clear();
    process.send?.({ ok: true });
  } else if (msg.cmd === 'report') {
    const report: ReceiverReport = { requests, events, unique: seen.size, duplicates, firstAt, lastAt, ...(msg.arrivals === true ? { arrivals: [...seen] } : {}) };
    process.send?.(report);
  }
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
});
