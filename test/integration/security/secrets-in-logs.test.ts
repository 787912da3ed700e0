import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { type CreatedApiKey, createApiKey } from '../../../src/keys/key-store.js';
import { type Logger, createLogger } from '../../../src/logger.js';
import { type Service, startService } from '../../../src/main.js';
import { type TestEnv, createTestEnv, waitFor } from '../../support/harness.js';
import { postgresBehindProxy, type TcpProxy } from '../../support/tcp-proxy.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';

/**
 * Secrets never reach the logs. The service runs (api, ingest, dispatcher) with its own logger
 * at `trace`, every line captured, while it is sent Basic credentials right and wrong, creates
 * callback URLs that carry `user:pass@` credentials (answering with their signing secrets),
 * fails deliveries to them every way (error status, refused connection, SSRF-blocked address,
 * timeout, credentials it cannot decode), and loses its database in the middle of requests.
 * No captured line may hold an API secret key, the base64 of any Basic credentials, a callback
 * URL's password, a signing secret, or the database password. The embedded mode's first key,
 * printed once on stdout, is not in its log line either.
 */

const tag = Math.random().toString(36).slice(2, 10);
const DB_PASSWORD = `dbpass-${tag}`;

class Capture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) if (line !== '') this.lines.push(line);
    done();
  }
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const basic = (user: string, secret: string) => `Basic ${b64(`${user}:${secret}`)}`;

/** Every text a secret could show up as in a line: itself, its base64, its JSON and URL escapes. */
function forms(secret: string): string[] {
  return [...new Set([secret, b64(secret), JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)])];
}

function leaks(lines: readonly string[], secrets: readonly string[]): { secret: string; line: string }[] {
  const out: { secret: string; line: string }[] = [];
  for (const secret of secrets) for (const form of forms(secret)) for (const line of lines) if (line.includes(form)) out.push({ secret, line: line.slice(0, 400) });
  return out;
}

let t: TestEnv;
let capture: Capture;
let proxy: TcpProxy;
let service: Service;
let app: FastifyInstance;
let receiver: WebhookReceiver;
let closedPort: number;
const secrets: string[] = [DB_PASSWORD];

async function call(method: string, url: string, authorization: string | null, body?: unknown) {
  const res = await app.inject({
    method: method as 'GET',
    url,
    headers: { ...(authorization !== null ? { authorization } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, body: res.body };
}

beforeAll(async () => {
  t = await createTestEnv();
  // The service reaches Postgres through a proxy (to take it away later), with a password in its URL.
  let viaProxy: URL;
  ({ proxy, url: viaProxy } = await postgresBehindProxy(t.env['DATABASE_URL'] as string));
  viaProxy.username = 'postgres';
  viaProxy.password = DB_PASSWORD;
  receiver = await WebhookReceiver.start((r) => (r.path.startsWith('/hang') ? { hang: true } : r.path.startsWith('/fail') ? { status: 500, body: 'failing on purpose' } : { status: 200 }));
  closedPort = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  const config = loadConfig({
    ...withoutNats,
    DATABASE_URL: viaProxy.toString(),
    LOG_LEVEL: 'trace',
    API_RATE_LIMIT: '0',
    API_CACHE_ENTRIES: '0',
    API_AUTH_FAILURE_LIMIT: '1000',
    WEBHOOK_ALLOWLIST: '127.0.0.1/32',
    WEBHOOK_RETRY_SCHEDULE: '0.05,0.05,0.05',
    WEBHOOK_TIMEOUT_MS: '300',
    WEBHOOK_POLL_MS: '20',
    WEBHOOK_BATCH_WINDOW_MS: '0',
    WEBHOOK_LEASE_MS: '1000',
    PROJECTOR_POLL_MS: '100',
  });
  capture = new Capture();
  const log: Logger = createLogger('trace', 'mailtally', capture);
  service = await startService(config, ['api', 'ingest', 'projector', 'dispatcher'], log);
  app = service.http as FastifyInstance;
});

afterAll(async () => {
  await service?.stop();
  await receiver?.close();
  await proxy?.stop();
  await t?.cleanup();
});

describe('secrets in the logs', () => {
  it('are never written, whatever the requests, webhook failures and outages', async () => {
    const key = t.key;
    const readOnly = await createApiKey(t.db.kysely, { readOnly: true });
    const other: CreatedApiKey = await createApiKey(t.db.kysely);
    secrets.push(key.SecretKey, readOnly.SecretKey, other.SecretKey, `${key.ApiKey}:${key.SecretKey}`, `${other.ApiKey}:${other.SecretKey}`, `${readOnly.ApiKey}:${readOnly.SecretKey}`);
    const auth = basic(key.ApiKey, key.SecretKey);

    // Basic credentials, right and wrong, on every kind of route.
    const stat = '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime';
    expect((await call('GET', stat, auth)).status).toBe(200);
    expect((await call('GET', '/v1/webhooks/attempts', auth)).status).toBe(200);
    expect((await call('POST', '/v3/REST/eventcallbackurl', basic(readOnly.ApiKey, readOnly.SecretKey), { EventType: 'open', Url: 'https://x.example.com/h' })).status).toBe(403);
    for (const wrong of [basic(key.ApiKey, `${key.SecretKey}x`), basic(other.ApiKey, key.SecretKey), `Bearer ${key.SecretKey}`, `Basic ${key.SecretKey}`]) {
      expect((await call('GET', stat, wrong)).status).toBeGreaterThanOrEqual(400);
      expect((await call('POST', '/v1/events', wrong, '[]')).status).toBeGreaterThanOrEqual(400);
    }
    secrets.push(`${key.SecretKey}x`);

    // Callback URLs with credentials, each failing its own way.
    const urls: [string, string, string][] = [
      ['sent', 'hook-user', `fail-pass-${tag}`],
      ['open', 'hook-user2', `hang-pass-${tag}`],
      ['click', 'refused-user', `refused-pass-${tag}`],
      ['bounce', 'ssrf-user', `ssrf-pass-${tag}`],
      ['spam', 'odd-user', `bad%zz-pass-${tag}`],
      ['blocked', 'ok-user', `ok-pass-${tag}`],
    ];
    const target = (type: string) =>
      type === 'sent' ? `127.0.0.1:${receiver.port}/fail/sent`
      : type === 'open' ? `127.0.0.1:${receiver.port}/hang/open`
      : type === 'click' ? `127.0.0.1:${closedPort}/click`
      : type === 'bounce' ? '10.11.12.13/bounce'
      : `127.0.0.1:${receiver.port}/ok/${type}`;
    for (const [type, user, pass] of urls) {
      const res = await call('POST', '/v3/REST/eventcallbackurl', auth, { EventType: type, Url: `http://${user}:${pass}@${target(type)}`, Version: type === 'open' ? 2 : 1 });
      expect(res.status, res.body).toBe(201);
      const signing = String((JSON.parse(res.body) as { Data: { SigningSecret: string }[] }).Data[0]?.SigningSecret);
      expect(signing).toMatch(/^whsec_/);
      secrets.push(pass, decodeURIComponent(pass.replace('%zz', '')), `${user}:${pass}`, signing, signing.slice('whsec_'.length));
    }
    // A PUT with new credentials, and a refused URL that carries some.
    const list = JSON.parse((await call('GET', '/v3/REST/eventcallbackurl?EventType=blocked', auth)).body) as { Data: { ID: number }[] };
    const putPass = `put-pass-${tag}`;
    expect((await call('PUT', `/v3/REST/eventcallbackurl/${list.Data[0]?.ID}`, auth, { Url: `http://put-user:${putPass}@127.0.0.1:${receiver.port}/fail/blocked` })).status).toBe(200);
    expect((await call('POST', '/v3/REST/eventcallbackurl', auth, { EventType: 'unsub', Url: `ftp://u:refused-${tag}@example.com/x` })).status).toBe(400);
    secrets.push(putPass, `put-user:${putPass}`);

    // Events for every URL: deliveries fail, retry, and the failing URLs die.
    const ev = (type: string, i: number) => ({ event: type, time: 1_700_000_000 + i, MessageID: 1000 + i, email: `r${i}@example.com`, ...(type === 'click' ? { url: 'https://example.com/l' } : {}) });
    const events = ['sent', 'open', 'click', 'bounce', 'spam', 'blocked'].flatMap((type, i) => [ev(type, i), ev(type, i + 10)]);
    expect(JSON.parse((await call('POST', '/v1/events', auth, events)).body)).toMatchObject({ Accepted: events.length });
    await waitFor('failed attempts for every failing URL', async () => {
      const rows = await t.db.kysely.selectFrom('webhook_attempts').select(['error_class']).execute();
      const classes = new Set(rows.map((r) => r.error_class));
      return ['http_status', 'timeout', 'connect_refused', 'ssrf_blocked'].every((c) => classes.has(c));
    }, 30_000);
    await waitFor('failing URLs to turn dead', async () => {
      const dead = await t.db.kysely.selectFrom('callback_urls').select('id').where('status', '=', 'dead').execute();
      return dead.length >= 3;
    }, 30_000);

    // Credentials that are not valid percent-encoding are sent as they are, not a delivery that throws.
    const odd = await t.db.kysely.selectFrom('callback_urls').select('id').where('event_type', '=', 'spam').executeTakeFirstOrThrow();
    const attempts = () => t.db.kysely.selectFrom('webhook_attempts').select(['delivery_id', 'outcome', 'error_class']).where('url_id', '=', odd.id).execute();
    const delivered = async () => new Set((await attempts()).filter((a) => a.outcome === 'delivered').map((a) => String(a.delivery_id))).size;
    await waitFor('the odd-credentials URL`s two deliveries delivered', async () => (await delivered()) === 2, 30_000);
    // An attempt before may have run out of the test's short deadline on a busy machine; none threw.
    expect((await attempts()).filter((a) => a.outcome !== 'delivered' && a.error_class !== 'timeout')).toEqual([]);
    expect(receiver.at('/ok/spam')[0]?.headers.authorization).toBe(basic('odd-user', `bad%zz-pass-${tag}`));

    expect(capture.lines.filter((l) => l.includes('failed unexpectedly'))).toEqual([]);

    // Requests refused for their body (415, 413) are not the database being away: no such line,
    // and the outage below still gets its own.
    const refused = await app.inject({ method: 'POST', url: '/v3/REST/eventcallbackurl', headers: { authorization: auth, 'content-type': 'text/plain' }, payload: 'x' });
    expect(refused.statusCode).toBe(415);
    expect((await call('POST', '/v3/REST/eventcallbackurl', auth, `"${'x'.repeat(1_100_000)}"`)).status).toBe(413);
    expect(capture.lines.filter((l) => l.includes('the database is unavailable'))).toEqual([]);

    // The database goes away in the middle of requests (5xx answers are logged with their error,
    // a database away once every 10 s with its cause).
    await proxy.cut();
    for (let i = 0; i < 3; i++) {
      expect((await call('GET', stat, auth)).status).toBeGreaterThanOrEqual(500);
      expect((await call('POST', '/v1/events', auth, [ev('sent', 99)])).status).toBe(503);
      expect((await call('GET', '/v1/webhooks/attempts', auth)).status).toBeGreaterThanOrEqual(500);
    }
    await new Promise((r) => setTimeout(r, 1500));
    await proxy.restore();
    await waitFor('the service to reach its database again', async () => (await call('GET', stat, auth)).status === 200, 30_000);

    // The capture saw the service at work, errors included…
    const lines = capture.lines;
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.some((l) => l.includes('"level":50') || l.includes('"level":40'))).toBe(true);
    expect(lines.some((l) => l.includes('request failed') || l.includes('request answered 503: the database is unavailable'))).toBe(true);
    // Nine requests answered 503 within seconds: one line says so.
    expect(lines.filter((l) => l.includes('request answered 503: the database is unavailable'))).toHaveLength(1);
    // …and no secret in any line.
    expect(leaks(lines, secrets)).toEqual([]);
  });

  it('keeps the embedded mode`s first secret key out of its log line (it is printed once on stdout)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-secrets-'));
    const printed: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      printed.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return true;
    });
    const embeddedCapture = new Capture();
    let embedded: Service | null = null;
    try {
      embedded = await startService(loadConfig({ DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'trace' }), ['api'], createLogger('trace', 'mailtally', embeddedCapture));
    } finally {
      spy.mockRestore();
      await embedded?.stop();
      await new Promise((r) => setTimeout(r, 300));
      rmSync(dataDir, { recursive: true, force: true });
    }
    const json = printed.join('').split('\n').find((l) => l.startsWith('{') && l.includes('SecretKey'));
    expect(json).toBeDefined();
    const key = JSON.parse(json as string) as CreatedApiKey;
    expect(embeddedCapture.lines.some((l) => l.includes(key.ApiKey))).toBe(true);
    expect(leaks(embeddedCapture.lines, [key.SecretKey, `${key.ApiKey}:${key.SecretKey}`])).toEqual([]);
  });
});
