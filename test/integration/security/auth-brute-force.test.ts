import type { FastifyInstance, FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthFailureLimiter } from '../../../src/api/conventions/rate-limit.js';
import { authenticate } from '../../../src/http/auth.js';
import { KeyVerifier, createApiKey, revokeApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { type TestEnv, createTestEnv, startHttpService } from '../../support/harness.js';

/**
 * Guessing secrets over HTTP Basic is slowed down: past API_AUTH_FAILURE_LIMIT failed attempts
 * a minute from one address, every endpoint that takes Basic auth (/v3/REST, /v1/events,
 * /v1/webhooks/*) answers that address 429 with Retry-After — even for right credentials the
 * service has not verified yet — while another address with valid credentials is not affected,
 * and credentials the service has verified still pass from the blocked address (failing on
 * purpose behind a shared address locks no tenant out). Failures count across endpoints, and a
 * forged X-Forwarded-For does not make a fresh address.
 */

const LIMIT = 5;
let t: TestEnv;
let service: Service;
let app: FastifyInstance;

beforeAll(async () => {
  t = await createTestEnv({ API_AUTH_FAILURE_LIMIT: String(LIMIT), API_RATE_LIMIT: '0' });
  ({ service, app } = await startHttpService(t, ['api', 'ingest']));
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

const basic = (user: string, secret: string) => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

const ENDPOINTS = [
  { method: 'GET', url: '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime', ok: 200 },
  { method: 'GET', url: '/v3/REST/eventcallbackurl', ok: 200 },
  { method: 'POST', url: '/v1/events', body: '[]', ok: 200 },
  { method: 'GET', url: '/v1/webhooks/attempts', ok: 200 },
  { method: 'POST', url: '/v1/webhooks/replay', body: '{"FromPosition":0}', ok: 202 },
] as const;
type Endpoint = (typeof ENDPOINTS)[number];

async function call(e: Endpoint, address: string, authorization: string, headers: Record<string, string> = {}) {
  const res = await app.inject({
    method: e.method,
    url: e.url,
    remoteAddress: address,
    headers: { authorization, ...('body' in e ? { 'content-type': 'application/json' } : {}), ...headers },
    ...('body' in e ? { payload: e.body } : {}),
  });
  return { status: res.statusCode, retryAfter: res.headers['retry-after'], body: res.json() as unknown };
}

describe('failed Basic-auth attempts', () => {
  it.each(ENDPOINTS.map((e, i) => [e.url.split('?')[0], e, i] as const))('%s: 429 after the limit for that address only', async (_name, e, i) => {
    const attacker = `203.0.113.${10 + i}`;
    const bystander = `198.51.100.${10 + i}`;
    const right = basic(t.key.ApiKey, t.key.SecretKey);
    // Right credentials this service has never verified (a guess that would have found them).
    const fresh = await createApiKey(t.db.kysely);
    const unproven = basic(fresh.ApiKey, fresh.SecretKey);
    for (let n = 0; n < LIMIT; n++) expect((await call(e, attacker, basic(t.key.ApiKey, `guess-${n}`))).status, `attempt ${n + 1}`).toBe(401);

    const blocked = await call(e, attacker, basic(t.key.ApiKey, 'guess-after'));
    expect(blocked.status).toBe(429);
    expect(Number(blocked.retryAfter)).toBeGreaterThan(0);
    expect(blocked.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/failed authentication/), StatusCode: 429 });
    // Even a right secret not verified before is refused to that address for now: guessing cannot go on.
    expect((await call(e, attacker, unproven)).status).toBe(429);
    // A forged X-Forwarded-For is not another address.
    expect((await call(e, attacker, unproven, { 'x-forwarded-for': bystander })).status).toBe(429);

    expect((await call(e, bystander, right)).status).toBe(e.ok);
    expect((await call(e, bystander, basic(t.key.ApiKey, 'one-wrong'))).status).toBe(401);
    expect((await call(e, bystander, right)).status).toBe(e.ok);
    // Credentials the service has verified pass from the blocked address too: a tenant behind
    // the same NAT or proxy as whoever fails on purpose is not locked out.
    expect((await call(e, attacker, right)).status).toBe(e.ok);
    expect((await call(e, attacker, unproven)).status).toBe(429);
  });

  it('counts failures across endpoints', async () => {
    const attacker = '203.0.113.99';
    for (let n = 0; n < LIMIT; n++) {
      const e = ENDPOINTS[n % ENDPOINTS.length] as Endpoint;
      expect((await call(e, attacker, basic('no-such-key', `guess-${n}`))).status).toBe(401);
    }
    const fresh = await createApiKey(t.db.kysely);
    for (const e of ENDPOINTS) expect((await call(e, attacker, basic(fresh.ApiKey, fresh.SecretKey))).status, e.url).toBe(429);
  });
});

describe('credentials verified before, at a blocked address', () => {
  it('are checked again once their cached check expired, and pass unless revoked meanwhile', async () => {
    // Cached checks that expire at once: each request is verified again.
    const verifier = new KeyVerifier(t.db.kysely, 1);
    const failures = new AuthFailureLimiter(LIMIT, 60_000);
    const request = (authorization: string) => ({ ip: '203.0.113.200', headers: { authorization } }) as unknown as FastifyRequest;
    const key = await createApiKey(t.db.kysely);
    const right = basic(key.ApiKey, key.SecretKey);
    expect((await authenticate(request(right), verifier, failures)).apiKeyId).toBe(String(key.APIKeyID));
    for (let n = 0; n < LIMIT; n++) await expect(authenticate(request(basic(key.ApiKey, `guess-${n}`)), verifier, failures)).rejects.toMatchObject({ statusCode: 401 });
    await new Promise((r) => setTimeout(r, 5));
    expect((await authenticate(request(right), verifier, failures)).apiKeyId).toBe(String(key.APIKeyID));
    const other = await createApiKey(t.db.kysely);
    await expect(authenticate(request(basic(other.ApiKey, other.SecretKey)), verifier, failures)).rejects.toMatchObject({ statusCode: 429 });
    // Revoked (this verifier not told): checked again, refused.
    await revokeApiKey(t.db.kysely, key.ApiKey);
    await new Promise((r) => setTimeout(r, 5));
    await expect(authenticate(request(right), verifier, failures)).rejects.toMatchObject({ statusCode: 401 });
  });
});

describe('guesses sent all at once', () => {
  it('meet the limit as guesses sent one after another do: checks still running count', async () => {
    const attacker = '203.0.113.120';
    const e = ENDPOINTS[0];
    const answers = await Promise.all(Array.from({ length: 60 }, (_, n) => call(e, attacker, basic(t.key.ApiKey, `burst-${n}`))));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(LIMIT);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(60 - LIMIT);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    const fresh = await createApiKey(t.db.kysely);
    expect((await call(e, attacker, basic(fresh.ApiKey, fresh.SecretKey))).status).toBe(429);
  });

  it('do not block a client sending many requests at once with the right credentials', async () => {
    const key = await createApiKey(t.db.kysely);
    const client = '198.51.100.120';
    const e = ENDPOINTS[0];
    const answers = await Promise.all(Array.from({ length: 40 }, () => call(e, client, basic(key.ApiKey, key.SecretKey))));
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 40 }, () => 200));
  });
});

describe('behind a trusted proxy (TRUST_PROXY)', () => {
  const PROXY = '10.0.0.7';
  let behind: Service;
  let proxied: FastifyInstance;

  beforeAll(async () => {
    ({ service: behind, app: proxied } = await startHttpService(t, ['api'], { TRUST_PROXY: '10.0.0.0/8' }));
  });

  afterAll(async () => {
    await behind?.stop();
  });

  const viaProxy = async (client: string, authorization: string, peer = PROXY) =>
    (await proxied.inject({ method: 'GET', url: '/v3/REST/eventcallbackurl', remoteAddress: peer, headers: { authorization, 'x-forwarded-for': client } })).statusCode;

  it('counts failures per client the proxy names, so one client cannot lock out the others', async () => {
    const right = basic(t.key.ApiKey, t.key.SecretKey);
    for (let n = 0; n < LIMIT; n++) expect(await viaProxy('203.0.113.50', basic(t.key.ApiKey, `guess-${n}`))).toBe(401);
    expect(await viaProxy('203.0.113.50', right)).toBe(429);
    expect(await viaProxy('198.51.100.50', right)).toBe(200);
  });

  it('takes X-Forwarded-For only from the proxies it names', async () => {
    const fresh = await createApiKey(t.db.kysely);
    const right = basic(fresh.ApiKey, fresh.SecretKey);
    const direct = '192.0.2.60';
    for (let n = 0; n < LIMIT; n++) expect(await viaProxy(`198.51.100.${60 + n}`, basic(t.key.ApiKey, `guess-${n}`), direct)).toBe(401);
    // Each forged X-Forwarded-For came straight from one peer: that peer is the client.
    expect(await viaProxy('198.51.100.99', right, direct)).toBe(429);
  });
});
