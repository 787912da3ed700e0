import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../../src/main.js';
import { type TestEnv, createTestEnv, startHttpService } from '../../support/harness.js';

/**
 * /v1/webhooks/* spends the key's request budget (API_RATE_LIMIT), the one /v3/REST spends, and
 * a key runs one webhook replay at a time: a replay asked for while one runs gets 429.
 */

let t: TestEnv;
let service: Service;
let app: FastifyInstance;

beforeAll(async () => {
  t = await createTestEnv({ API_RATE_LIMIT: '1', API_RATE_BURST: '2' });
  ({ service, app } = await startHttpService(t, ['api', 'ingest']));
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

const auth = () => `Basic ${Buffer.from(`${t.key.ApiKey}:${t.key.SecretKey}`).toString('base64')}`;
const attempts = async () => (await app.inject({ method: 'GET', url: '/v1/webhooks/attempts', headers: { authorization: auth() } })).statusCode;
const replay = async () =>
  (await app.inject({ method: 'POST', url: '/v1/webhooks/replay', headers: { authorization: auth(), 'content-type': 'application/json' }, payload: '{"FromPosition":0}' })).statusCode;
const rest = async () => (await app.inject({ method: 'GET', url: '/v3/REST/eventcallbackurl', headers: { authorization: auth() } })).statusCode;

describe('/v1/webhooks/* limits', () => {
  it('spends the same per-key request budget as /v3/REST', async () => {
    // A burst of 2: one /v3/REST request and one /v1 request, then 429 on either.
    expect(await rest()).toBe(200);
    expect(await attempts()).toBe(200);
    const over = await app.inject({ method: 'GET', url: '/v1/webhooks/attempts', headers: { authorization: auth() } });
    expect(over.statusCode).toBe(429);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expect(over.json()).toMatchObject({ StatusCode: 429 });
    expect(await replay()).toBe(429);
    expect(await rest()).toBe(429);
  });

  it('runs one replay per key at a time', async () => {
    await new Promise((r) => setTimeout(r, 2100));
    // A log to replay, so the first replay is still running when the second arrives.
    const events = Array.from({ length: 1000 }, (_, i) => ({ event: 'open', time: 1_700_000_000 + i, MessageID: 1000 + i, email: `r${i}@example.com`, EventID: `r${i}` }));
    const posted = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: auth(), 'content-type': 'application/json' }, payload: JSON.stringify(events) });
    expect(posted.statusCode).toBe(200);
    const both = await Promise.all([replay(), replay()]);
    expect(both.sort()).toEqual([202, 429]);
  });
});
