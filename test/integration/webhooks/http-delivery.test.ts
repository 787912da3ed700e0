import type dns from 'node:dns';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpDelivery } from '../../../src/webhooks/http-delivery.js';
import { DRAIN_BYTES, SNIPPET_BYTES } from '../../../src/webhooks/http-exchange.js';
import { EMPTY_ALLOW_LIST, parseAllowList } from '../../../src/webhooks/ssrf-guard.js';
import { type Behaviour, WebhookReceiver, ok } from '../../support/webhook-receiver.js';

/**
 * One request at a time against real loopback receivers: the SSRF guard refuses hostile
 * targets before any byte leaves, redirects are not followed, one deadline bounds a hang and a
 * slowloris, a huge body is read only through its cap, basic auth becomes a header, and
 * connections are kept alive.
 */

const LOCAL = parseAllowList(['127.0.0.1/32']);
let receiver: WebhookReceiver;
const clients: HttpDelivery[] = [];
const client = (opts: Partial<ConstructorParameters<typeof HttpDelivery>[0]> = {}) => {
  const c = new HttpDelivery({ allowList: LOCAL, deadlineMs: 2000, ...opts });
  clients.push(c);
  return c;
};
const post = (c: HttpDelivery, url: string) => c.post(url, { 'webhook-id': 'msg_1' }, '{"event":"open"}');

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});
afterEach(() => {
  receiver.behaviour = ok;
  receiver.requests.length = 0;
});
afterAll(async () => {
  for (const c of clients) await c.close();
  await receiver.close();
});

describe('SSRF: hostile targets are refused without the allow-list', () => {
  const port = () => receiver.port;
  it.each([
    ['127.0.0.1', () => `http://127.0.0.1:${port()}/hook`],
    ['::1', () => `http://[::1]:${port()}/hook`],
    ['10.0.0.1', () => 'http://10.0.0.1/hook'],
    ['169.254.169.254 (cloud metadata)', () => 'http://169.254.169.254/latest/meta-data/'],
    ['::ffff:127.0.0.1 (IPv4-mapped)', () => `http://[::ffff:127.0.0.1]:${port()}/hook`],
    ['2130706433 (decimal 127.0.0.1)', () => `http://2130706433:${port()}/hook`],
    ['0x7f000001 (hex 127.0.0.1)', () => `http://0x7f000001:${port()}/hook`],
    ['017700000001 (octal 127.0.0.1)', () => `http://017700000001:${port()}/hook`],
    ['https on a private address', () => 'https://192.168.0.10/hook'],
  ])('%s', async (_name, url) => {
    const outcome = await post(client({ allowList: EMPTY_ALLOW_LIST }), url());
    expect(outcome).toMatchObject({ ok: false, statusCode: null, errorClass: 'ssrf_blocked' });
    expect(receiver.requests).toHaveLength(0);
  });

  it('refuses a name resolving to a private address (localhost) as it does a name that does not exist, so names cannot be probed', async () => {
    const missing = (() => ((_n: string, _o: unknown, cb: (e: Error | null, a: dns.LookupAddress[]) => void) => cb(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }), []))) as () => typeof dns.lookup;
    const local = await post(client({ allowList: EMPTY_ALLOW_LIST }), `http://localhost:${receiver.port}/hook`);
    const absent = await post(client({ allowList: EMPTY_ALLOW_LIST, resolve: missing() }), 'http://no-such-host.internal/hook');
    expect(local).toMatchObject({ ok: false, statusCode: null, errorClass: 'dns', snippet: 'localhost does not resolve to a public address' });
    expect(absent).toMatchObject({ ok: false, statusCode: null, errorClass: 'dns', snippet: 'no-such-host.internal does not resolve to a public address' });
    expect(receiver.requests).toHaveLength(0);
  });

  it('connects to the address the guard vetted (a name resolving to a private address is refused; to an allowed one, pinned)', async () => {
    const resolveTo = (address: string) =>
      ((_n: string, _o: unknown, cb: (e: Error | null, a: dns.LookupAddress[]) => void) => cb(null, [{ address, family: 4 }])) as unknown as typeof dns.lookup;
    const refused = await post(client({ allowList: EMPTY_ALLOW_LIST, resolve: resolveTo('10.1.2.3') }), 'http://hooks.example/x');
    expect(refused).toMatchObject({ ok: false, errorClass: 'dns', snippet: 'hooks.example does not resolve to a public address' });
    const pinned = await post(client({ resolve: resolveTo('127.0.0.1') }), `http://hooks.example:${receiver.port}/pinned`);
    expect(pinned).toMatchObject({ ok: true, statusCode: 200 });
    expect(receiver.requests.map((r) => [r.path, r.headers['host']])).toEqual([['/pinned', `hooks.example:${receiver.port}`]]);
  });

  it('never follows a redirect, to a private address or anywhere', async () => {
    receiver.behaviour = (r) =>
      r.path === '/to-metadata'
        ? { status: 302, headers: { location: 'http://169.254.169.254/latest/meta-data/' } }
        : r.path === '/to-self'
          ? { status: 307, headers: { location: `http://127.0.0.1:${receiver.port}/target` } }
          : { status: 200 };
    const c = client();
    expect(await post(c, receiver.url('/to-metadata'))).toMatchObject({ ok: false, statusCode: 302, errorClass: 'redirect' });
    expect(await post(c, receiver.url('/to-self'))).toMatchObject({ ok: false, statusCode: 307, errorClass: 'redirect' });
    expect(receiver.requests.map((r) => r.path)).toEqual(['/to-metadata', '/to-self']);
  });
});

describe('bounds', () => {
  it('gives up on a receiver that never answers at the deadline', async () => {
    receiver.behaviour = () => ({ hang: true });
    const outcome = await post(client({ deadlineMs: 300 }), receiver.url('/hang'));
    expect(outcome).toMatchObject({ ok: false, statusCode: null, errorClass: 'timeout' });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(250);
    expect(outcome.latencyMs).toBeLessThan(5000);
  });

  it('reads an endless body only through its cap (the status decides the outcome)', async () => {
    receiver.behaviour = (r) => ({ status: r.path === '/endless-500' ? 500 : 200, endless: true });
    const c = client();
    const good = await post(c, receiver.url('/endless-200'));
    expect(good).toMatchObject({ ok: true, statusCode: 200, errorClass: null });
    expect(good.snippet?.length).toBe(SNIPPET_BYTES);
    const bad = await post(c, receiver.url('/endless-500'));
    expect(bad).toMatchObject({ ok: false, statusCode: 500, errorClass: 'http_status' });
    expect(bad.snippet?.length).toBe(SNIPPET_BYTES);
    expect(DRAIN_BYTES).toBeLessThanOrEqual(64 * 1024);
  });

  it('bounds a slowloris body by the same deadline', async () => {
    receiver.behaviour = () => ({ status: 200, trickle: true });
    const outcome = await post(client({ deadlineMs: 400 }), receiver.url('/trickle'));
    expect(outcome).toMatchObject({ ok: true, statusCode: 200 });
    expect(outcome.latencyMs).toBeLessThan(5000);
    expect((outcome.snippet ?? '').length).toBeGreaterThan(0);
  });

  it('reports a refused connection, and Retry-After on 429/503', async () => {
    const closed = await WebhookReceiver.start();
    const url = closed.url('/gone');
    await closed.close();
    expect(await post(client(), url)).toMatchObject({ ok: false, errorClass: 'connect_refused' });
    receiver.behaviour = () => ({ status: 429, headers: { 'retry-after': '30' }, body: 'slow down' });
    expect(await post(client(), receiver.url('/busy'))).toMatchObject({ ok: false, statusCode: 429, errorClass: 'http_status', retryAfterMs: 30_000, snippet: 'slow down' });
  });
});

describe('requests', () => {
  it('sends the URL`s basic-auth credentials as an Authorization header, not in the request line', async () => {
    const c = client();
    await post(c, `http://us%40er:p%3Ass@127.0.0.1:${receiver.port}/auth?x=1`);
    const r = receiver.requests[0];
    expect(r?.path).toBe('/auth?x=1');
    expect(r?.headers['authorization']).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
    expect(r?.headers['content-type']).toBe('application/json');
    expect(r?.headers['webhook-id']).toBe('msg_1');
  });

  it('keeps connections alive across requests', async () => {
    const behaviour: Behaviour = () => ({ status: 204 });
    receiver.behaviour = behaviour;
    const c = client();
    for (let i = 0; i < 20; i++) expect((await post(c, receiver.url('/ka'))).ok).toBe(true);
    // 20 requests over at most two connections (the pool may open a second while the first finishes).
    expect(new Set(receiver.requests.map((r) => r.remotePort)).size).toBeLessThanOrEqual(2);
  });
});

describe('pools of URLs no longer used', () => {
  it('are let go at the second sweep without a request, kept while requests come', async () => {
    const c = client({ idleSweepMs: 3_600_000 });
    const url = `http://127.0.0.1:${receiver.port}/hook`;
    for (const id of ['1', '2', '3']) expect((await c.post(url, { 'webhook-id': `msg_${id}` }, '{}', id)).ok).toBe(true);
    expect(c.endpoints).toBe(3);
    c.sweep();
    // Used since the last sweep: kept, once.
    expect(c.endpoints).toBe(3);
    expect((await c.post(url, { 'webhook-id': 'msg_4' }, '{}', '2')).ok).toBe(true);
    c.sweep();
    expect(c.endpoints).toBe(1);
    // A URL let go works again when asked for (a new pool).
    expect((await c.post(url, { 'webhook-id': 'msg_5' }, '{}', '1')).ok).toBe(true);
    expect(c.endpoints).toBe(2);
  });
});
