import http from 'node:http';
import net from 'node:net';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../../src/api/routes/index.js';
import type { CreatedApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { sampleEvents, withBareMessageId } from '../../support/events.js';
import { type TestEnv, createTestEnv, startHttpService } from '../../support/harness.js';

/**
 * Fuzzed requests beyond query strings (test/integration/api/fuzz.test.ts has those), against
 * the whole HTTP surface of `serve --roles api,ingest` through inject(): malformed JSON and odd
 * field values in POST/PUT /v3/REST/eventcallbackurl, /v1/events and /v1/webhooks/replay
 * bodies, odd content types, weird paths and methods, every form of Authorization header. The
 * server never answers a 5xx but a 501 for a method it does not implement, and on /v3 every 4xx
 * is Mailjet's error envelope.
 */

const SEED = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31);

let t: TestEnv;
let service: Service;
let app: FastifyInstance;
let ownUrlId: string;

const basicOf = (k: CreatedApiKey) => `Basic ${Buffer.from(`${k.ApiKey}:${k.SecretKey}`).toString('base64')}`;

beforeAll(async () => {
  t = await createTestEnv({ API_RATE_LIMIT: '0', API_AUTH_FAILURE_LIMIT: '1000000', API_CACHE_ENTRIES: '0' });
  ({ service, app } = await startHttpService(t, ['api', 'ingest']));
  const events = await inject({ method: 'POST', url: '/v1/events', body: `[${sampleEvents().map(withBareMessageId).join(',')}]` });
  expect(events.status).toBe(200);
  const created = await inject({ method: 'POST', url: '/v3/REST/eventcallbackurl', body: JSON.stringify({ EventType: 'open', Url: 'https://hooks.example.com/open' }) });
  expect(created.status).toBe(201);
  ownUrlId = String((created.json as { Data: { ID: number }[] }).Data[0]?.ID);
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

interface Req {
  method: string;
  url: string;
  body?: string | Buffer;
  contentType?: string | null;
  authorization?: string | null;
}

let requests = 0;

async function inject(r: Req): Promise<{ status: number; text: string; json: unknown }> {
  requests++;
  const headers: Record<string, string> = {};
  const auth = r.authorization === undefined ? basicOf(t.key) : r.authorization;
  if (auth !== null) headers['authorization'] = auth;
  const type = r.contentType === undefined ? (r.body !== undefined ? 'application/json' : null) : r.contentType;
  if (type !== null) headers['content-type'] = type;
  const res = await app.inject({ method: r.method as 'GET', url: r.url, headers, ...(r.body !== undefined ? { payload: r.body } : {}) });
  let json: unknown = undefined;
  try {
    json = res.body === '' ? undefined : JSON.parse(res.body);
  } catch {
    // not JSON (the /docs page, metrics)
  }
  return { status: res.statusCode, text: res.body, json };
}

/** The property every fuzzed request must have: no 5xx; on /v3 (and /v1), a 4xx is the envelope. */
async function check(r: Req): Promise<number> {
  const res = await inject(r);
  const what = `${r.method} ${r.url.slice(0, 200)} ${String(r.body ?? '').slice(0, 200)} [${r.authorization ?? ''}] (seed ${SEED})`;
  // The one 5xx a client's request may get: 501 for a method the server does not implement at all (RFC 9110 §15.6.2).
  if (app.supportedMethods.includes(r.method)) expect(res.status, what).toBeLessThan(500);
  else expect(res.status === 501 || res.status < 500, `${what}: ${res.status}`).toBe(true);
  const enveloped = /^\/+v[13]\//i.test(r.url) && r.method !== 'HEAD';
  if (res.status >= 400 && enveloped) {
    expect(res.json, `${what}: ${res.text.slice(0, 300)}`).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/\S/), StatusCode: res.status });
  }
  return res.status;
}

const scalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom('', ' ', 'open', 'OPEN', 'unsubscribe', '8', '0', '-1', '1.5', 'true', 'false', 'alive', 'dead', 'Dead ', '2', '3', 'null', '\u0000', '%00', '\ud800', 'é', '9'.repeat(30)),
  fc.constantFrom(0, 1, 2, 7, 8, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2, true, false, null),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer(),
);
const urlValue = fc.oneof(
  fc.constantFrom(
    'https://hooks.example.com/x',
    'http://user:pa%20ss@hooks.example.com/x',
    'http://u:%zz@hooks.example.com/x',
    'https://hooks.example.com',
    'https://hooks.example.com/',
    'ftp://hooks.example.com/x',
    'javascript:alert(1)//x',
    'http://[::1]/x',
    'http://[::1/x',
    'http://%zz/x',
    'http://127.0.0.1:99999/x',
    'http:///x',
    '//hooks.example.com/x',
    'data:text/plain,hi',
    `https://hooks.example.com/${'a'.repeat(3000)}`,
    'https://hooks.example.com/\u0000',
    'https://exa\u00admple.com/x',
  ),
  fc.webUrl({ withQueryParameters: true, withFragments: true }),
  fc.string({ maxLength: 60 }),
);
const jsonish: fc.Arbitrary<unknown> = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 6 }), scalar, { maxKeys: 3 }));

/** Property names as a client may spell them, known and unknown. */
const key = (names: readonly string[]) =>
  fc.oneof(fc.constantFrom(...names, ...names.map((n) => n.toLowerCase()), ...names.map((n) => n.toUpperCase()), 'ID', 'APIKeyID', '__proto__', 'constructor', ''), fc.string({ maxLength: 10 }));

const objectBody = (names: readonly string[], value: fc.Arbitrary<unknown>) =>
  fc.array(fc.tuple(key(names), value), { maxLength: 6 }).map((pairs) => `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`);

/** Raw bodies that are not what any route wants: garbage, cut JSON, bad UTF-8, deep nesting, huge. */
const rawBody: fc.Arbitrary<string | Buffer> = fc.oneof(
  fc.constantFrom('', ' ', '{', '}', '[', '{"a":}', '{"EventType":"open",', 'nul', 'undefined', "{'a':1}", '{"a":1}{"b":2}', '\u0000', '\ufeff{}', '[]', '{}', 'null', '1e999', '-', '"'),
  fc.uint8Array({ maxLength: 100 }).map((b) => Buffer.from(b)),
  fc.constantFrom(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d])),
  // Deep nesting, including depths that parse but overflow recursive code after the parser.
  fc.oneof(fc.constantFrom(64, 65, 2000, 3000, 3500, 3900), fc.integer({ min: 1, max: 20_000 })).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
  fc.oneof(fc.constantFrom(64, 65, 2000, 3000, 3500), fc.integer({ min: 1, max: 5000 })).map((n) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`),
  fc.constant(`{"Url":"${'x'.repeat(1024 * 1024)}"}`),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
);

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  { weight: 3, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'Application/JSON', 'application/json; charset=latin1', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=zz', 'application/xml', 'application/jsonx', '*/*', ';;;', 'application/json\u0000') },
  { weight: 1, arbitrary: fc.constant(null) },
);

const CALLBACK_FIELDS = ['EventType', 'Url', 'IsBackup', 'Status', 'Version'] as const;
const REPLAY_FIELDS = ['FromPosition', 'ToPosition', 'FromTS', 'ToTS', 'EventType', 'EventTypes'] as const;
const positionValue = fc.oneof(scalar, fc.constantFrom('0', '1', '18446744073709551615', '9223372036854775807', '2024-01-01T00:00:00Z', '2024-02-30', 'yesterday', 1_433_333_949, ['open', 'sent'], ['x', 7]));

describe('fuzzed requests', () => {
  it(`POST and PUT /v3/REST/eventcallbackurl with malformed bodies and field values (seed ${SEED})`, async () => {
    const id = fc.oneof({ weight: 4, arbitrary: fc.constant(() => ownUrlId) }, { weight: 1, arbitrary: fc.constantFrom('0', '-1', '1.0', '%20', '99999999999999999999', 'abc', '1e3').map((s) => () => s) });
    const req = fc.record({
      put: fc.boolean(),
      id,
      body: fc.oneof({ weight: 3, arbitrary: objectBody(CALLBACK_FIELDS, fc.oneof(scalar, urlValue, jsonish)) }, { weight: 1, arbitrary: rawBody }),
      contentType,
    });
    const statuses = new Map<number, number>();
    for (const r of fc.sample(req, { numRuns: 900, seed: SEED })) {
      const status = await check({
        method: r.put ? 'PUT' : 'POST',
        url: r.put ? `/v3/REST/eventcallbackurl/${r.id()}` : '/v3/REST/eventcallbackurl',
        body: r.body,
        contentType: r.contentType,
      });
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    // The fuzz reached past validation sometimes, and was refused most of the time.
    expect((statuses.get(400) ?? 0) > 300, JSON.stringify([...statuses])).toBe(true);
  });

  it(`POST /v1/events and /v1/webhooks/replay with malformed bodies (seed ${SEED})`, async () => {
    const events = fc.record({
      body: fc.oneof(
        rawBody,
        fc.array(jsonish, { maxLength: 5 }).map((a) => JSON.stringify(a)),
        fc.array(objectBody(['event', 'time', 'MessageID', 'email', 'APIKeyID', 'EventID', 'url', 'mj_campaign_id'], fc.oneof(scalar, jsonish)), { maxLength: 5 }).map((a) => `[${a.join(',')}]`),
      ),
      contentType,
    });
    for (const r of fc.sample(events, { numRuns: 600, seed: SEED + 1 })) await check({ method: 'POST', url: '/v1/events', body: r.body, contentType: r.contentType });

    // Every depth around where parsing still works but recursive code after it overflows.
    for (let depth = 50; depth <= 6000; depth += depth < 1000 ? 475 : 150) {
      for (const body of [`[${'['.repeat(depth)}${']'.repeat(depth)}]`, `[${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}]`, `${'{"x":'.repeat(depth)}1${'}'.repeat(depth)}`]) {
        for (const url of ['/v1/events', '/v1/webhooks/replay', '/v3/REST/eventcallbackurl']) await check({ method: 'POST', url, body });
      }
    }

    const replay = fc.record({ body: fc.oneof({ weight: 3, arbitrary: objectBody(REPLAY_FIELDS, positionValue) }, { weight: 1, arbitrary: rawBody }), contentType });
    for (const r of fc.sample(replay, { numRuns: 500, seed: SEED + 2 })) await check({ method: 'POST', url: '/v1/webhooks/replay', body: r.body, contentType: r.contentType });
  });

  it(`weird paths and methods (seed ${SEED})`, async () => {
    const resources = [...RESOURCES.map((r) => r.name), 'eventcallbackurl'];
    const segment = fc.oneof(
      fc.constantFrom(...resources, ...resources.map((r) => r.toUpperCase()), ownUrlId, '', '.', '..', '%2e%2e', '%2F', '%00', '%', '%zz', '%E0%A4%A', '~', ';', '*', '?', '#', 'é', '%C3%A9', '\u00e9', '1'.repeat(30), '-1', '0', 'statcounters;x', 'null'),
      fc.string({ maxLength: 12 }).map(encodeURIComponent),
      fc.string({ unit: 'binary', maxLength: 8 }).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, ''))),
    );
    const prefix = fc.constantFrom('/v3/REST/', '/v3/rest/', '/V3/REST/', '/v3/REST//', '//v3/REST/', '/v3/', '/v3/DATA/', '/v1/', '/v1/webhooks/', '/v1/events/', '/', '/docs/', '/docs/static/', '/status/', '/openapi.json/');
    const method = fc.constantFrom('GET', 'GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'SEARCH', 'MKCOL', 'LOCK');
    const req = fc.record({
      method,
      prefix,
      segments: fc.array(segment, { maxLength: 4 }),
      query: fc.oneof(fc.constant(''), fc.constantFrom('?', '??', '?a', '?Limit=1&Limit=2', '?%zz=1', '?a[b]=1', '?Limit[]=5', `?${'x'.repeat(5000)}=1`)),
      body: fc.option(rawBody, { nil: undefined }),
    });
    for (const r of fc.sample(req, { numRuns: 1200, seed: SEED + 3 })) {
      await check({ method: r.method, url: `${r.prefix}${r.segments.join('/')}${r.query}`, ...(r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD' ? { body: r.body } : {}) });
    }
    // Path traversal through the docs' static files never reaches the repository.
    for (const path of ['/docs/static/../../package.json', '/docs/static/%2e%2e/%2e%2e/package.json', '/docs/static/..%2f..%2fpackage.json', '/docs/..%2f..%2f..%2fpackage.json', '/docs/static/%252e%252e/package.json']) {
      const res = await inject({ method: 'GET', url: path });
      expect(res.status, path).toBeLessThan(500);
      expect(res.text, path).not.toContain('"devDependencies"');
    }
  });

  it(`every form of Authorization header (seed ${SEED})`, async () => {
    const k = t.key;
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const header = fc.oneof(
      fc.constantFrom(
        '',
        'Basic',
        'Basic ',
        'Basic  ',
        `Bearer ${k.SecretKey}`,
        `Digest username="${k.ApiKey}"`,
        `Token ${b64(`${k.ApiKey}:${k.SecretKey}`)}`,
        'Basic !!!!',
        'Basic ====',
        'Basic a',
        'Basic YQ',
        `Basic ${b64(':')}`,
        `Basic ${b64(`${k.ApiKey}:`)}`,
        `Basic ${b64(`:${k.SecretKey}`)}`,
        `Basic ${b64(k.ApiKey)}`,
        `Basic ${b64(`${k.ApiKey}:${k.SecretKey}:extra`)}`,
        `Basic ${b64(`${k.ApiKey} :${k.SecretKey}`)}`,
        `Basic ${b64(`${k.ApiKey}:${k.SecretKey}`)} trailing`,
        `Basic ${b64(`${k.ApiKey}:${k.SecretKey}`)}, Basic ${b64('a:b')}`,
        `basic ${b64(`${k.ApiKey}:${k.SecretKey}`)}`,
        `BASIC\t${b64(`${k.ApiKey}:${k.SecretKey}`)}`,
        `Basic ${b64(`${k.ApiKey}:${k.SecretKey}`).replace(/=+$/, '')}`,
        `Basic ${b64('\u0000:\u0000')}`,
        `Basic ${b64('é:ü')}`,
        `Basic ${Buffer.from([0xff, 0x3a, 0xfe]).toString('base64')}`,
        `Basic ${b64(`${'k'.repeat(10_000)}:${'s'.repeat(10_000)}`)}`,
        `Basic ${'A'.repeat(100_000)}`,
        `${'x'.repeat(50_000)}`,
      ),
      fc.string({ maxLength: 60 }).map((s) => s.replace(/[^\t\x20-\x7e]/g, '')),
      fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 })).map(([u, p]) => `Basic ${b64(`${u}:${p}`)}`),
      fc.string({ maxLength: 40 }).map((s) => `Basic ${b64(s)}`),
    );
    const url = fc.constantFrom('/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime', '/v3/REST/eventcallbackurl', `/v3/REST/eventcallbackurl/${ownUrlId}`, '/v1/webhooks/attempts', '/v1/events');
    const statuses = new Map<number, number>();
    for (const [h, u] of fc.sample(fc.tuple(header, url), { numRuns: 250, seed: SEED + 4 })) {
      const post = u === '/v1/events';
      const status = await check({ method: post ? 'POST' : 'GET', url: u, authorization: h, ...(post ? { body: '[]' } : {}) });
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    expect(statuses.get(401) ?? 0, JSON.stringify([...statuses])).toBeGreaterThan(120);
    expect(requests).toBeGreaterThan(3400);
  });

  it('requests Node cannot parse: an envelope, never the raw request in the answer', async () => {
    const { hostname, port } = new URL(service.url as string);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname, () => socket.end(text));
        let answer = '';
        socket.setEncoding('utf8').on('data', (d: string) => (answer += d));
        socket.on('close', () => resolve(answer));
        socket.on('error', reject);
      });
    const auth = basicOf(t.key);
    const cases: [string, number][] = [
      [`GET /v3/REST/statcounters HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nX-Pad: ${'A'.repeat(20_000)}\r\n\r\n`, 431],
      [`GET /v3/REST/statcounters HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nBad Header: y\r\n\r\n`, 400],
      [`POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Length: abc\r\n\r\n[]`, 400],
      ['GARBAGE\r\n\r\n', 400],
      [`GET /v3/REST/statcounters HTTP/9.9\r\nAuthorization: ${auth}\r\n\r\n`, 400],
    ];
    for (const [request, status] of cases) {
      const answer = await raw(request);
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      expect(head.split('\r\n')[0], request.slice(0, 60)).toBe(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`);
      expect(JSON.parse(body)).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/\S/), StatusCode: status });
      expect(answer).not.toContain(t.key.SecretKey);
    }
  });
});
