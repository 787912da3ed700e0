import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExactJson } from '../../../src/events/exact-json.js';
import { type CreatedApiKey, createApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { type TestEnv, countRows, createTestEnv, waitFor, startHttpService } from '../../support/harness.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { basicAuth as basic } from '../../support/api.js';

/**
 * Tenant isolation beyond the statistics resources (test/integration/api/tenancy.test.ts has
 * those): another tenant's callback URL ids — in every spelling of the id — answer 404 to GET,
 * PUT and DELETE and stay untouched; ids and APIKeyIDs in bodies move nothing across tenants;
 * webhook attempts and replays are scoped to the key; an event naming another tenant's
 * APIKeyID in POST /v1/events is rejected and stored nowhere but the sender's dead letters.
 * Runs `serve --roles api,ingest,dispatcher` with a real receiver on loopback.
 */

let t: TestEnv;
let service: Service;
let app: FastifyInstance;
let receiver: WebhookReceiver;
let a: CreatedApiKey;
let b: CreatedApiKey;
let ro: CreatedApiKey;
const aUrls: Record<string, string> = {};
let bSentUrl: string;


async function call(key: CreatedApiKey, method: string, url: string, body?: unknown) {
  const res = await app.inject({
    method: method as 'GET',
    url,
    headers: { authorization: basic(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, body: res.body === '' ? null : (parseExactJson(res.body) as Record<string, unknown>), text: res.body };
}

const dataOf = (r: { body: Record<string, unknown> | null }) => (r.body?.['Data'] ?? []) as Record<string, unknown>[];
const NOT_FOUND = { ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 };

async function createUrl(key: CreatedApiKey, body: Record<string, unknown>): Promise<string> {
  const res = await call(key, 'POST', '/v3/REST/eventcallbackurl', body);
  expect(res.status, res.text).toBe(201);
  return String(dataOf(res)[0]?.['ID']);
}

beforeAll(async () => {
  t = await createTestEnv({ API_RATE_LIMIT: '0', API_CACHE_ENTRIES: '0', WEBHOOK_ALLOWLIST: '127.0.0.1/32', WEBHOOK_RETRY_SCHEDULE: '0.05,0.05', WEBHOOK_POLL_MS: '20', WEBHOOK_BATCH_WINDOW_MS: '0' });
  a = t.key;
  b = await createApiKey(t.db.kysely);
  ro = await createApiKey(t.db.kysely, { readOnly: true });
  receiver = await WebhookReceiver.start((r) => (r.path.endsWith('/fail') ? { status: 500, body: 'nope' } : { status: 200 }));
  ({ service, app } = await startHttpService(t, ['api', 'ingest', 'dispatcher']));

  aUrls['sent'] = await createUrl(a, { EventType: 'sent', Url: receiver.url('/a/sent') });
  aUrls['open'] = await createUrl(a, { EventType: 'open', Url: receiver.url('/a/fail'), Version: 2 });
  aUrls['openBackup'] = await createUrl(a, { EventType: 'open', Url: receiver.url('/a/open-backup'), IsBackup: true });
  bSentUrl = await createUrl(b, { EventType: 'sent', Url: receiver.url('/b/sent') });

  const ev = (type: string, id: string, extra: Record<string, unknown> = {}) => ({ event: type, time: 1_700_000_000, MessageID: id, email: `${id}@example.com`, ...extra });
  expect((await call(a, 'POST', '/v1/events', [ev('sent', '1'), ev('sent', '2'), ev('open', '1', { ip: '1.2.3.4' })])).body).toMatchObject({ Accepted: 3 });
  expect((await call(b, 'POST', '/v1/events', [ev('sent', '1'), ev('sent', '3')])).body).toMatchObject({ Accepted: 2 });
  await waitFor('deliveries to both tenants', async () => receiver.at('/a/sent').length >= 2 && receiver.at('/b/sent').length >= 2 && receiver.at('/a/fail').length >= 1);
  // The failing URL runs out of retries and turns dead (its backup takes over): let that settle first.
  await waitFor('a`s failing URL to turn dead and the outbox to empty', async () => {
    const url = await t.db.kysely.selectFrom('callback_urls').select('status').where('id', '=', BigInt(aUrls['open'] as string)).executeTakeFirst();
    const pending = await t.db.kysely.selectFrom('webhook_deliveries').select('id').execute();
    return url?.status === 'dead' && pending.length === 0;
  });
});

afterAll(async () => {
  await service?.stop();
  await receiver?.close();
  await t?.cleanup();
});

/** Every way a client may write an id in a path that the server reads as that same id. */
const spellings = (id: string) => [id, `0${id}`, `00${id}`, `%20${id}`, `${id}%20`, `${id}/`, `%30${id}`];

describe('eventcallbackurl across tenants', () => {
  it('answers 404 to GET, PUT and DELETE of another tenant`s id in every spelling, and changes nothing', async () => {
    const before = await call(a, 'GET', '/v3/REST/eventcallbackurl?Limit=100');
    for (const id of Object.values(aUrls)) {
      for (const s of spellings(id)) {
        const path = `/v3/REST/eventcallbackurl/${s}`;
        expect((await call(a, 'GET', path)).status, `own ${path}`).toBe(200);
        expect((await call(b, 'GET', path)).body, path).toEqual(NOT_FOUND);
        expect((await call(b, 'PUT', path, { Url: 'https://evil.example.com/steal', Status: 'dead' })).body, path).toEqual(NOT_FOUND);
        expect((await call(b, 'PUT', path, {})).body, path).toEqual(NOT_FOUND);
        expect((await call(b, 'DELETE', path)).body, path).toEqual(NOT_FOUND);
        expect((await call(ro, 'GET', path)).body, path).toEqual(NOT_FOUND);
      }
    }
    expect(await call(a, 'GET', '/v3/REST/eventcallbackurl?Limit=100')).toEqual(before);
  });

  it('answers a read-only key 403 on writes whether the id exists or not (no existence oracle)', async () => {
    for (const path of [`/v3/REST/eventcallbackurl/${aUrls['sent']}`, '/v3/REST/eventcallbackurl/987654321']) {
      expect((await call(ro, 'PUT', path, { Status: 'dead' })).status, path).toBe(403);
      expect((await call(ro, 'DELETE', path)).status, path).toBe(403);
    }
    expect((await call(a, 'GET', `/v3/REST/eventcallbackurl/${aUrls['sent']}`)).status).toBe(200);
  });

  it('lists only the key`s own URLs, whatever APIKey filter is asked for', async () => {
    const own = dataOf(await call(b, 'GET', '/v3/REST/eventcallbackurl?Limit=100'));
    expect(own.map((r) => String(r['ID']))).toEqual([bSentUrl]);
    expect(own.every((r) => String(r['APIKeyID']) === b.APIKeyID)).toBe(true);
    expect((await call(b, 'GET', `/v3/REST/eventcallbackurl?APIKey=${a.APIKeyID}`)).body).toEqual({ Count: 0, Data: [], Total: 0 });
    expect((await call(b, 'GET', `/v3/REST/eventcallbackurl?apikey=${a.APIKeyID}&countOnly=1`)).body).toEqual({ Count: 0, Data: [], Total: 0 });
    expect((await call(ro, 'GET', '/v3/REST/eventcallbackurl')).body).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it('ignores ids and APIKeyIDs in bodies: nothing is created or changed in another tenant', async () => {
    const aBefore = await call(a, 'GET', '/v3/REST/eventcallbackurl?Limit=100');
    const created = await call(b, 'POST', '/v3/REST/eventcallbackurl', { EventType: 'click', Url: receiver.url('/b/click'), APIKeyID: Number(a.APIKeyID), ID: Number(aUrls['sent']), apikey: a.APIKeyID });
    expect(created.status, created.text).toBe(201);
    expect(dataOf(created)[0]).toMatchObject({ APIKeyID: Number(b.APIKeyID), EventType: 'click' });
    expect(String(dataOf(created)[0]?.['ID'])).not.toBe(aUrls['sent']);
    const put = await call(b, 'PUT', `/v3/REST/eventcallbackurl/${bSentUrl}`, { ID: Number(aUrls['sent']), APIKeyID: Number(a.APIKeyID), Url: receiver.url('/b/sent') });
    expect(put.status, put.text).toBe(200);
    expect(dataOf(put)[0]).toMatchObject({ ID: Number(bSentUrl), APIKeyID: Number(b.APIKeyID) });
    expect(await call(a, 'GET', '/v3/REST/eventcallbackurl?Limit=100')).toEqual(aBefore);
    // and b's clean-up of its own URL leaves a's alone
    expect((await call(b, 'DELETE', `/v3/REST/eventcallbackurl/${String(dataOf(created)[0]?.['ID'])}`)).status).toBe(204);
    expect(await call(a, 'GET', '/v3/REST/eventcallbackurl?Limit=100')).toEqual(aBefore);
  });
});

describe('webhook attempts and replay across tenants', () => {
  it('shows each key only its own attempts, whatever the filters name', async () => {
    const aRows = dataOf(await call(a, 'GET', '/v1/webhooks/attempts?Limit=1000'));
    const bRows = dataOf(await call(b, 'GET', '/v1/webhooks/attempts?Limit=1000'));
    expect(aRows.length).toBeGreaterThanOrEqual(3);
    expect(bRows.length).toBeGreaterThanOrEqual(2);
    const aIds = new Set(Object.values(aUrls));
    expect(aRows.every((r) => aIds.has(String(r['CallbackUrlID'])))).toBe(true);
    expect(bRows.every((r) => String(r['CallbackUrlID']) === bSentUrl)).toBe(true);
    const aAttempt = aRows[0] as Record<string, unknown>;
    for (const q of [`CallbackUrlID=${aUrls['sent']}`, `UrlID=${aUrls['open']}`, `WebhookID=${String(aAttempt['WebhookID'])}`, 'Outcome=failed', `CallbackUrlID=${aUrls['open']}&countOnly=1`]) {
      const res = await call(b, 'GET', `/v1/webhooks/attempts?${q}`);
      expect(res.status, q).toBe(200);
      expect(dataOf(res).every((r) => String(r['CallbackUrlID']) === bSentUrl), q).toBe(true);
      if (!q.startsWith('Outcome')) expect(res.body?.['Total'], q).toBe(0);
    }
    expect((await call(ro, 'GET', '/v1/webhooks/attempts')).body).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it('replays only the key`s own events, to its own URLs', async () => {
    const aBefore = receiver.requests.filter((r) => r.path.startsWith('/a/')).length;
    const bBefore = receiver.at('/b/').length;
    const res = await call(b, 'POST', '/v1/webhooks/replay', { FromPosition: 0 });
    expect(res).toMatchObject({ status: 202, body: { Events: 2, Deliveries: 2 } });
    await waitFor('b`s replayed deliveries', async () => receiver.at('/b/').length >= bBefore + 2);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.requests.filter((r) => r.path.startsWith('/a/')).length).toBe(aBefore);
    // A tenant cannot be named in the body.
    expect((await call(b, 'POST', '/v1/webhooks/replay', { FromPosition: 0, APIKeyID: Number(a.APIKeyID) })).status).toBe(400);
    expect((await call(ro, 'POST', '/v1/webhooks/replay', { FromPosition: 0 })).status).toBe(403);
  });
});

describe('POST /v1/events naming another tenant', () => {
  it('rejects an event whose APIKeyID is another tenant`s, stores nothing for that tenant, and dead-letters it as the sender`s', async () => {
    const count = async (key: CreatedApiKey) => (await t.db.kysely.selectFrom('events').select('event_id').where('api_key_id', '=', BigInt(key.APIKeyID)).execute()).length;
    const [aEvents, bEvents, letters] = [await count(a), await count(b), await countRows(t.db, 'dead_letters')];
    const forA = { event: 'sent', time: 1_700_000_100, MessageID: 77, email: 'victim@example.com', APIKeyID: Number(a.APIKeyID), EventID: 'cross-1' };
    const res = await call(b, 'POST', '/v1/events', [forA, { ...forA, APIKeyID: a.APIKeyID, EventID: 'cross-2' }, { ...forA, APIKeyID: Number(b.APIKeyID), EventID: 'own-1' }]);
    expect(res.body).toEqual({
      Accepted: 1,
      Duplicates: 0,
      Rejected: 2,
      Errors: [
        { Index: 0, Reason: expect.stringMatching(/^APIKeyID: /) },
        { Index: 1, Reason: expect.stringMatching(/^APIKeyID: /) },
      ],
    });
    expect(await count(a)).toBe(aEvents);
    expect(await count(b)).toBe(bEvents + 1);
    const newLetters = await t.db.kysely.selectFrom('dead_letters').select(['api_key_id', 'source']).orderBy('id', 'desc').limit(2).execute();
    expect(await countRows(t.db, 'dead_letters')).toBe(letters + 2);
    expect(newLetters).toEqual([
      { api_key_id: BigInt(b.APIKeyID), source: 'http' },
      { api_key_id: BigInt(b.APIKeyID), source: 'http' },
    ]);
    // a's webhooks never see it
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.requests.some((r) => r.body.includes('victim@example.com') && r.path.startsWith('/a/'))).toBe(false);
  });
});
