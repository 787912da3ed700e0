import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerEventCallbackUrlRoutes } from '../../../src/webhooks/routes/eventcallbackurl.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

/** /v3/REST/eventcallbackurl through app.inject(): every status code and validation rule. */

let f: ApiFixture;
const PATH = '/v3/REST/eventcallbackurl';
const data = (body: unknown) => (body as { Data: Record<string, unknown>[] }).Data;

beforeAll(async () => {
  f = await openApiFixture({ extraRoutes: [registerEventCallbackUrlRoutes] });
});
afterAll(async () => f?.close());

async function create(body: unknown, key = f.keys.a) {
  const res = await f.request('POST', PATH, { key, body });
  expect(res.status).toBe(201);
  return data(res.body)[0] as Record<string, unknown>;
}

describe('POST', () => {
  it('creates with 201 in the envelope, Mailjet fields in Mailjet order, the signing secret shown once', async () => {
    const res = await f.request('POST', PATH, { body: { EventType: 'open', Url: 'https://u:p@example.com/hooks/open', Version: '2' } });
    expect(res.status).toBe(201);
    const body = res.body as { Count: number; Total: number; Data: Record<string, unknown>[] };
    expect({ Count: body.Count, Total: body.Total }).toEqual({ Count: 1, Total: 1 });
    const obj = body.Data[0] as Record<string, unknown>;
    expect(Object.keys(obj)).toEqual(['APIKeyID', 'EventType', 'ID', 'IsBackup', 'Status', 'Url', 'Version', 'SigningSecret']);
    expect(obj).toMatchObject({ APIKeyID: Number(f.keys.a.APIKeyID), EventType: 'open', IsBackup: false, Status: 'alive', Url: 'https://u:p@example.com/hooks/open', Version: 2 });
    expect(obj['SigningSecret']).toMatch(/^whsec_/);
    const again = await f.get(`${PATH}/${String(obj['ID'])}`);
    expect(Object.keys(data(again.body)[0] as object)).not.toContain('SigningSecret');
  });

  it('takes property names in any case and numbers/booleans as strings', async () => {
    const obj = await create({ eventtype: 'click', url: 'https://example.com/c', isBackup: 'true', version: 1 });
    expect(obj).toMatchObject({ EventType: 'click', IsBackup: true, Version: 1 });
  });

  it.each([
    [{ EventType: 'open', Url: 'https://example.com' }, /root URL/],
    [{ EventType: 'open', Url: 'ftp://example.com/x' }, /http:\/\/ or https:\/\//],
    [{ EventType: 'nope', Url: 'https://example.com/x' }, /EventType must be one of/],
    [{ EventType: 'sent' }, /Url is required/],
    [{ EventType: 'sent', Url: 'https://example.com/x', Version: 3 }, /Version must be 1/],
    [{ EventType: 'sent', Url: 'https://example.com/x', Extra: 1 }, /Unknown property "Extra"/],
    ['[1,2]', /must be a JSON object/],
  ])('refuses %j with a 400 naming the problem', async (body, message) => {
    const res = await f.request('POST', PATH, { body });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ErrorInfo: '', StatusCode: 400, ErrorMessage: expect.stringMatching(message) });
  });

  it('refuses a second primary (or backup) for the same event type with a 400 naming the conflict', async () => {
    await create({ EventType: 'bounce', Url: 'https://example.com/b1' });
    const res = await f.request('POST', PATH, { body: { EventType: 'bounce', Url: 'https://example.com/b2' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ErrorMessage: 'MJ18 A Eventcallbackurl resource with value "bounce" for EventType already exists.' });
    await create({ EventType: 'bounce', Url: 'https://example.com/b3' }, f.keys.b);
  });
});

describe('GET', () => {
  it('lists the tenant`s URLs with filters (EventType as a name or number), paging, countOnly and Sort', async () => {
    for (const type of ['sent', 'spam', 'unsub']) await create({ EventType: type, Url: `https://example.com/${type}` }, f.keys.b);
    await create({ EventType: 'spam', Url: 'https://example.com/spam-b', IsBackup: true, Version: 2 }, f.keys.b);
    const all = await f.get(PATH, f.keys.b);
    expect(all.status).toBe(200);
    expect(data(all.body).map((r) => r['Url'])).toEqual([
      'https://example.com/b3',
      'https://example.com/sent',
      'https://example.com/spam',
      'https://example.com/unsub',
      'https://example.com/spam-b',
    ]);
    expect(data((await f.get(`${PATH}?EventType=3`, f.keys.b)).body).map((r) => r['Url'])).toEqual(['https://example.com/spam', 'https://example.com/spam-b']);
    expect(data((await f.get(`${PATH}?eventtype=spam&backup=1`, f.keys.b)).body).map((r) => r['Url'])).toEqual(['https://example.com/spam-b']);
    expect((await f.get(`${PATH}?Version=2&Status=alive`, f.keys.b)).body).toMatchObject({ Count: 1, Total: 1 });
    expect((await f.get(`${PATH}?countOnly=1`, f.keys.b)).body).toEqual({ Count: 5, Data: [], Total: 5 });
    const page = await f.get(`${PATH}?Limit=2&Offset=1&Sort=ID+DESC`, f.keys.b);
    expect(page.body).toMatchObject({ Count: 2, Total: 5 });
    expect(data(page.body).map((r) => r['Url'])).toEqual(['https://example.com/unsub', 'https://example.com/spam']);
    expect((await f.get(`${PATH}?APIKey=${f.keys.a.APIKeyID}`, f.keys.b)).body).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it('answers 400 for a bad filter, sort or limit', async () => {
    for (const q of ['EventType=9', 'Status=asleep', 'Backup=maybe', 'Sort=Url', 'Limit=1001']) {
      const res = await f.get(`${PATH}?${q}`);
      expect(res.status, q).toBe(400);
    }
  });

  it('gets one URL; another tenant`s or an unknown ID is a 404', async () => {
    const obj = await create({ EventType: 'blocked', Url: 'https://example.com/blocked' });
    const res = await f.get(`${PATH}/${String(obj['ID'])}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ Count: 1, Total: 1, Data: [{ ID: obj['ID'], EventType: 'blocked' }] });
    expect((await f.get(`${PATH}/${String(obj['ID'])}`, f.keys.b)).status).toBe(404);
    expect((await f.get(`${PATH}/999999`)).body).toMatchObject({ StatusCode: 404, ErrorMessage: 'Object not found' });
    expect((await f.get(`${PATH}/not-a-number`)).status).toBe(404);
  });
});

describe('PUT and DELETE', () => {
  it('updates only what is sent (200), and a new Url revives a dead URL', async () => {
    const obj = await create({ EventType: 'sent', Url: 'https://example.com/s1' });
    const id = String(obj['ID']);
    const v2 = await f.request('PUT', `${PATH}/${id}`, { body: { Version: '2' } });
    expect(v2.status).toBe(200);
    expect(data(v2.body)[0]).toMatchObject({ Url: 'https://example.com/s1', Version: 2, Status: 'alive' });
    await f.db.kysely.updateTable('callback_urls').set({ status: 'dead' }).where('id', '=', BigInt(id)).execute();
    expect(data((await f.get(`${PATH}/${id}`)).body)[0]).toMatchObject({ Status: 'dead' });
    const revived = await f.request('PUT', `${PATH}/${id}`, { body: { url: 'https://example.com/s2' } });
    expect(data(revived.body)[0]).toMatchObject({ Url: 'https://example.com/s2', Status: 'alive', Version: 2 });
    expect((await f.request('PUT', `${PATH}/${id}`, { body: { Url: 'https://example.com/' } })).status).toBe(400);
    expect((await f.request('PUT', `${PATH}/${id}`, { key: f.keys.b, body: { Version: 1 } })).status).toBe(404);
  });

  it('deletes with 204 and an empty body, taking node-mailjet`s {} body; then 404', async () => {
    const obj = await create({ EventType: 'unsub', Url: 'https://example.com/u' });
    const other = await f.request('DELETE', `${PATH}/${String(obj['ID'])}`, { key: f.keys.b, body: {} });
    expect(other.status).toBe(404);
    const res = await f.request('DELETE', `${PATH}/${String(obj['ID'])}`, { body: {} });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await f.request('DELETE', `${PATH}/${String(obj['ID'])}`)).status).toBe(404);
  });

  it('answers 403 to a read-only key on every write, 401 without credentials, 405 for other methods', async () => {
    const obj = await create({ EventType: 'open', Url: 'https://example.com/o-ro' }, f.keys.b);
    const ro = f.keys.readOnly;
    expect((await f.request('POST', PATH, { key: ro, body: { EventType: 'open', Url: 'https://example.com/x' } })).status).toBe(403);
    expect((await f.request('PUT', `${PATH}/${String(obj['ID'])}`, { key: ro, body: { Version: 2 } })).status).toBe(403);
    expect((await f.request('DELETE', `${PATH}/${String(obj['ID'])}`, { key: ro, body: {} })).status).toBe(403);
    expect((await f.get(PATH, ro)).status).toBe(200);
    expect((await f.get(PATH, null)).status).toBe(401);
    expect((await f.request('PATCH', `${PATH}/${String(obj['ID'])}`, { body: {} })).status).toBe(405);
    expect((await f.request('PUT', PATH, { body: {} })).status).toBe(405);
  });
});

describe('an item named by its unique key EventType|Backup', () => {
  it('GET, PUT and DELETE take `spam` (the primary) and `spam|true` (the backup), names in any case', async () => {
    const primary = await create({ EventType: 'spam', Url: 'https://example.com/spam' });
    const backup = await create({ EventType: 'spam', Url: 'https://example.com/spam-backup', IsBackup: true });
    const ids = async (path: string, key = f.keys.a) => {
      const res = await f.get(`${PATH}/${path}`, key);
      return res.status === 200 ? data(res.body).map((r) => r['ID']) : res.status;
    };
    expect(await ids('spam')).toEqual([primary['ID']]);
    expect(await ids('SPAM|false')).toEqual([primary['ID']]);
    expect(await ids('spam|0')).toEqual([primary['ID']]);
    expect(await ids('spam|true')).toEqual([backup['ID']]);
    expect(await ids(encodeURIComponent('spam|1'))).toEqual([backup['ID']]);
    // Each tenant's own: key b's `spam` is b's URL.
    const ofB = data((await f.get(`${PATH}?EventType=spam&Backup=false`, f.keys.b)).body).map((r) => r['ID']);
    expect(ofB).toHaveLength(1);
    expect(await ids('spam', f.keys.b)).toEqual(ofB);
    expect(ofB).not.toEqual([primary['ID']]);
    // An event type with no URL, a name that is no event type: 404.
    expect(await ids('unsub|true')).toBe(404);
    expect(await ids('nope')).toBe(404);
    // `unsubscribe`, which a body may give for `unsub`, names it in a path too.
    const unsub = await create({ EventType: 'unsubscribe', Url: 'https://example.com/unsub' });
    expect(await ids('unsubscribe')).toEqual([unsub['ID']]);
    expect(await ids('Unsub|false')).toEqual([unsub['ID']]);

    const put = await f.request('PUT', `${PATH}/spam|true`, { body: { Url: 'https://example.com/spam-backup-2' } });
    expect(put.status).toBe(200);
    expect(data(put.body)[0]).toMatchObject({ ID: backup['ID'], Url: 'https://example.com/spam-backup-2' });
    expect((await f.request('DELETE', `${PATH}/spam|true`, { body: {} })).status).toBe(204);
    expect(await ids('spam|true')).toBe(404);
    expect(await ids('spam')).toEqual([primary['ID']]);
  });
});
