import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerWebhookAdmin } from '../../../src/webhooks/routes/webhook-admin.js';
import type { Db } from '../../../src/db/connect.js';
import { parseExactJson } from '../../../src/events/exact-json.js';
import { createServer } from '../../../src/http/server.js';
import { type CreatedApiKey, KeyVerifier, createApiKey } from '../../../src/keys/key-store.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { basicAuth } from '../../support/api.js';
import { openMigratedDb } from '../../support/databases.js';
import { quietLogger, waitFor } from '../../support/harness.js';
import { append, positionsInLog } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/** GET /v1/webhooks/attempts and POST /v1/webhooks/replay through app.inject(). */

let db: Db;
let cleanup: () => Promise<void>;
let app: FastifyInstance;
let receiver: WebhookReceiver;
let dispatcher: Dispatcher;
const keys: Record<'a' | 'b' | 'ro', CreatedApiKey> = {} as Record<'a' | 'b' | 'ro', CreatedApiKey>;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
  keys.a = await createApiKey(db.kysely);
  keys.b = await createApiKey(db.kysely);
  keys.ro = await createApiKey(db.kysely, { readOnly: true });
  app = createServer({ port: 0, host: '127.0.0.1', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger());
  registerWebhookAdmin(app, { db: db.kysely, verifier: new KeyVerifier(db.kysely), grouping: { windowMs: 0, maxEvents: 100, maxBytes: 262_144 }, maxReplayEvents: 2 });
  await app.ready();
  receiver = await WebhookReceiver.start((r) => (r.path === '/down' ? { status: 502, body: 'bad gateway' } : { status: 200 }));
  await hook(db, keys.a.APIKeyID, { EventType: 'sent', Url: receiver.url('/up') });
  await hook(db, keys.a.APIKeyID, { EventType: 'open', Url: receiver.url('/down') });
  dispatcher = await startDispatcher(db, { retryScheduleSeconds: [0.05] });
  await append(db, keys.a.APIKeyID, [
    { event: 'sent', time: 1_700_000_000, MessageID: '19421777835146490', email: 'a@example.com', EventID: 's1' },
    { event: 'sent', time: 1_700_000_001, MessageID: '2', email: 'b@example.com', EventID: 's2' },
    { event: 'sent', time: 1_700_000_002, MessageID: '3', email: 'c@example.com', EventID: 's3' },
    { event: 'open', time: 1_700_000_003, MessageID: '2', email: 'b@example.com', EventID: 'o1' },
  ]);
  await outboxEmpty(db);
});
afterAll(async () => {
  await dispatcher?.stop();
  await app?.close();
  await receiver?.close();
  await cleanup?.();
});

async function call(method: 'GET' | 'POST', url: string, key: CreatedApiKey | null, body?: unknown) {
  const res = await app.inject({
    method,
    url,
    headers: { ...(key !== null ? { authorization: basicAuth(key) } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, body: res.body === '' ? '' : (parseExactJson(res.body) as Record<string, unknown>) };
}

describe('GET /v1/webhooks/attempts', () => {
  it('lists the key`s attempts, newest first, in the envelope, with filters and paging', async () => {
    const all = await call('GET', '/v1/webhooks/attempts?Limit=100', keys.a);
    expect(all.status).toBe(200);
    const rows = (all.body as { Data: Record<string, unknown>[] }).Data;
    expect(rows.filter((r) => r['Outcome'] === 'delivered')).toHaveLength(3);
    expect(rows.find((r) => r['Outcome'] === 'failed')).toMatchObject({ StatusCode: 502, ErrorClass: 'http_status', ResponseSnippet: 'bad gateway', EventCount: 1 });
    const failed = await call('GET', '/v1/webhooks/attempts?outcome=FAILED', keys.a);
    expect((failed.body as { Data: unknown[] }).Data).toHaveLength(2);
    expect((await call('GET', '/v1/webhooks/attempts?Limit=1&Offset=1', keys.a)).body).toMatchObject({ Count: 1, Total: rows.length });
    expect((await call('GET', '/v1/webhooks/attempts?countOnly=true', keys.a)).body).toEqual({ Count: rows.length, Data: [], Total: rows.length });
    expect((await call('GET', '/v1/webhooks/attempts', keys.b)).body).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it('answers 400 for a bad filter and 401 without credentials', async () => {
    expect((await call('GET', '/v1/webhooks/attempts?Outcome=maybe', keys.a)).status).toBe(400);
    expect((await call('GET', '/v1/webhooks/attempts?FromTS=yesterday', keys.a)).status).toBe(400);
    expect((await call('GET', '/v1/webhooks/attempts?WebhookID=%00', keys.a)).status).toBe(400);
    const empty = await call('GET', '/v1/webhooks/attempts?FromTS=1700000000&ToTS=1700000000', keys.a);
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ ErrorMessage: expect.stringContaining('ToTS must be later than FromTS'), StatusCode: 400 });
    expect((await call('GET', '/v1/webhooks/attempts', null)).status).toBe(401);
  });
});

describe('POST /v1/webhooks/replay', () => {
  it('re-sends a position range (202), a bounded number per call, with the original webhook ids', async () => {
    const position = await positionsInLog(db, keys.a.APIKeyID);
    const before = receiver.at('/up').length;
    const first = await call('POST', '/v1/webhooks/replay', keys.a, { FromPosition: Number(position('s1')) - 1, EventType: 'sent' });
    expect(first).toEqual({ status: 202, body: { Events: 2, Deliveries: 2, NextPosition: Number(position('s2')) } });
    const rest = await call('POST', '/v1/webhooks/replay', keys.a, { fromposition: String(position('s2')), eventtype: ['sent'] });
    expect(rest).toEqual({ status: 202, body: { Events: 1, Deliveries: 1, NextPosition: null } });
    await waitFor('3 replayed deliveries', async () => receiver.at('/up').length === before + 3);
    expect(receiver.at('/up').slice(before).map((r) => r.webhookId).sort()).toEqual(['s1', 's2', 's3'].map((e) => `msg_${position(e)}`).sort());
  });

  it('answers 400 without a starting point or with bad fields, 403 to a read-only key, 401 without credentials', async () => {
    expect(await call('POST', '/v1/webhooks/replay', keys.a, {})).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/FromPosition .* or FromTS/) } });
    expect((await call('POST', '/v1/webhooks/replay', keys.a, { FromTS: 'soon' })).status).toBe(400);
    expect((await call('POST', '/v1/webhooks/replay', keys.a, { FromTS: 0, Colour: 'red' })).status).toBe(400);
    // An empty list of types was a 202 that replayed nothing.
    expect(await call('POST', '/v1/webhooks/replay', keys.a, { FromTS: 0, EventType: [] })).toMatchObject({ status: 400, body: { ErrorMessage: 'EventType must name at least one event type' } });
    // A range that holds nothing is refused, not answered 202 with 0 events.
    expect(await call('POST', '/v1/webhooks/replay', keys.a, { FromPosition: 20, ToPosition: 10 })).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/ToPosition must be after FromPosition/) } });
    expect((await call('POST', '/v1/webhooks/replay', keys.a, { FromPosition: 10, ToPosition: 10 })).status).toBe(400);
    // Positions past the largest bigint are the request's fault, not the database's.
    for (const range of [{ FromPosition: '9999999999999999999' }, { FromPosition: 0, ToPosition: '9223372036854775808' }]) {
      expect(await call('POST', '/v1/webhooks/replay', keys.a, range)).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/Position must be a log position/) } });
    }
    expect(await call('POST', '/v1/webhooks/replay', keys.a, { FromTS: '2030-01-01T00:00:00Z', ToTS: '2020-01-01T00:00:00Z' })).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/ToTS must be later than FromTS/) } });
    expect((await call('POST', '/v1/webhooks/replay', keys.ro, { FromTS: 0 })).status).toBe(403);
    expect((await call('POST', '/v1/webhooks/replay', null, { FromTS: 0 })).status).toBe(401);
  });
});

describe('POST /v1/webhooks/replay while the key`s deliveries pile up', () => {
  it('answers 429 while the key has maxReplayBacklog deliveries waiting, other keys unaffected', async () => {
    const limited = createServer({ port: 0, host: '127.0.0.1', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger());
    registerWebhookAdmin(limited, { db: db.kysely, verifier: new KeyVerifier(db.kysely), grouping: { windowMs: 0, maxEvents: 100, maxBytes: 262_144 }, maxReplayBacklog: 3 });
    await limited.ready();
    const replay = async (key: CreatedApiKey) =>
      limited.inject({ method: 'POST', url: '/v1/webhooks/replay', headers: { authorization: basicAuth(key), 'content-type': 'application/json' }, payload: '{"FromPosition":0}' });
    try {
      // Three of key b's deliveries waiting an hour for their retry (no dispatcher takes them before).
      const bUrl = await hook(db, keys.b.APIKeyID, { EventType: 'click', Url: receiver.url('/b-backlog') });
      await sql`
        INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, retry, due_at)
        SELECT ${keys.b.APIKeyID}::int8, ${bUrl.id}::int8, 'msg_backlog_' || g, ARRAY['{}'], ARRAY[g::bigint], 2, true, now() + interval '1 hour'
        FROM generate_series(1, 3) AS g`.execute(db.kysely);
      const refused = await replay(keys.b);
      expect(refused.statusCode).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(refused.json()).toEqual({ ErrorInfo: '', ErrorMessage: 'This API key has 3 deliveries or more waiting to be sent; replay again once they have gone out (GET /v1/webhooks/attempts shows them)', StatusCode: 429 });
      expect((await replay(keys.a)).statusCode).toBe(202);
      await sql`DELETE FROM webhook_deliveries WHERE webhook_id LIKE 'msg_backlog_%'`.execute(db.kysely);
      expect((await replay(keys.b)).statusCode).toBe(202);
    } finally {
      await sql`DELETE FROM webhook_deliveries WHERE webhook_id LIKE 'msg_backlog_%'`.execute(db.kysely);
      await limited.close();
    }
  });
});
