import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerEventCallbackUrlRoutes } from '../../../src/webhooks/routes/eventcallbackurl.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

/**
 * Requests the API refuses, each with the status Mailjet's conventions give it and a message
 * naming what is wrong: parameters it does not answer, ids past 64 bits, methods a resource
 * does not take, and writes by a read-only key before their body is read.
 */

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture({ extraRoutes: [registerEventCallbackUrlRoutes] });
});
afterAll(async () => f?.close());

const message = (r: { body: unknown }) => (r.body as { ErrorMessage?: string }).ErrorMessage ?? '';

/** Each path answers 400 "Invalid parameter <name>: <why>…", the name as given beside it. */
async function expectNamed400(cases: readonly (readonly [path: string, name: string])[], why: string): Promise<void> {
  for (const [path, name] of cases) {
    const r = await f.get(path);
    expect(r.status, path).toBe(400);
    expect(message(r), path).toMatch(new RegExp(`^Invalid parameter ${name}: ${why}`));
  }
}

describe('refused requests', () => {
  it('names a parameter Mailjet documents for the resource but this server does not answer (400), in any case or alias', async () => {
    const cases: [string, string][] = [
      ['/v3/REST/toplinkclicked?MessageStatus=1', 'MessageStatus'],
      ['/v3/REST/toplinkclicked?messagestatusid=abc', 'MessageStatus'],
      ['/v3/REST/useragentstatistics?MESSAGESTATUS=2', 'MessageStatus'],
      ['/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&IdentityID=5', 'IdentityID'],
      ['/v3/REST/contactstatistics?Recalculate=true', 'Recalculate'],
      ['/v3/REST/contactstatistics?Recalculate%5B%5D=1', 'Recalculate'],
      ['/v3/REST/contactstatistics/a@b.co?IncludeAnonymized=1', 'IncludeAnonymized'],
    ];
    await expectNamed400(cases, 'not supported on ');
  });

  // node-mailjet's types offer TimeZone on listrecipientstatistics; every time here is UTC.
  it('takes TimeZone on listrecipientstatistics when it names UTC, and names another zone (400)', async () => {
    for (const zone of ['UTC', 'utc', 'Etc/UTC', 'GMT']) expect((await f.get(`/v3/REST/listrecipientstatistics?TimeZone=${encodeURIComponent(zone)}`)).status, zone).toBe(200);
    await expectNamed400(
      [
        ['/v3/REST/listrecipientstatistics?TimeZone=Europe/Paris', 'TimeZone'],
        ['/v3/REST/listrecipientstatistics?timezone=Nowhere/Else', 'timezone'],
      ],
      'times are served in UTC only',
    );
  });

  it('says a parameter was given more than once when that makes its value bad', async () => {
    const r = await f.get('/v3/REST/message?Limit=5&limit=6');
    expect(r.status).toBe(400);
    expect(message(r)).toBe('Invalid parameter Limit: must be a whole number (got "5,6"; it was given 2 times, its values joined by commas)');
  });

  it('names a bad parameter as the client sent it (an alias, another case)', async () => {
    const cases: [string, string][] = [
      ['/v3/REST/message?CampaignID=abc', 'CampaignID'],
      ['/v3/REST/message?campaign=abc', 'campaign'],
      ['/v3/REST/messagehistory?MessageID=abc', 'MessageID'],
      ['/v3/REST/toplinkclicked?ContactID%5B%5D=abc', 'ContactID'],
    ];
    await expectNamed400(cases, 'must be a non-negative whole number');
  });

  it('refuses a list parameter with no value in it (only commas) instead of reading it as an empty filter', async () => {
    const cases: [string, string][] = [
      ['/v3/REST/statcounters?CounterSource=Campaign&SourceIDs=,&CounterTiming=Message&CounterResolution=Lifetime', 'SourceIDs'],
      ['/v3/REST/campaignoverview?IDType=,', 'IDType'],
      ['/v3/REST/statistics/recipient-esp?CampaignID=7&EspNames=,%20,', 'EspNames'],
    ];
    await expectNamed400(cases, 'must list at least one value');
  });

  it('answers 404 for an item id past 64 bits, however many digits, and 400 for a filter value past them', async () => {
    for (const id of ['99999999999999999999', '999999999999999999999', '18446744073709551616']) {
      expect((await f.get(`/v3/REST/campaignoverview/${id}`)).status, id).toBe(404);
      expect((await f.get(`/v3/REST/messagestate/${id}`)).status, id).toBe(404);
    }
    const r = await f.get('/v3/REST/message?Campaign=999999999999999999999');
    expect(r.status).toBe(400);
    expect(message(r)).toMatch(/Campaign.*beyond the signed 64-bit range/);
  });

  it('answers OPTIONS, TRACE and QUERY with 405 and the methods the resource takes, HEAD with GET', async () => {
    const cases = [
      ['/v3/REST/message', 'GET, HEAD'],
      ['/v3/REST/message/4242', 'GET, HEAD'],
      ['/v3/REST/eventcallbackurl', 'GET, POST, HEAD'],
      ['/v3/REST/eventcallbackurl/1', 'GET, PUT, DELETE, HEAD'],
    ] as const;
    for (const [path, allow] of cases) {
      for (const method of ['OPTIONS', 'TRACE', 'QUERY'] as const) {
        const r = await f.request(method, path);
        expect(r.status, `${method} ${path}`).toBe(405);
        expect(r.headers['allow'], `${method} ${path}`).toBe(allow);
        expect(message(r)).toBe(`Method ${method} is not allowed on this resource; use ${allow}`);
      }
    }
  });

  it('answers a method the server does not implement at all with 501 in the error envelope', async () => {
    for (const method of ['PROPFIND', 'LOCK', 'SEARCH']) {
      const r = await f.request(method, '/v3/REST/message');
      expect(r.status, method).toBe(501);
      expect(r.body).toEqual({ ErrorInfo: '', ErrorMessage: `Method ${method} is not implemented by this server; the API takes GET, HEAD, POST, PUT and DELETE`, StatusCode: 501 });
    }
  });

  it('refuses a compressed body with 415 naming its coding, not as text that is not UTF-8', async () => {
    const res = await f.request('POST', '/v3/REST/eventcallbackurl', { body: gzipSync('{"EventType":"open"}'), headers: { 'content-encoding': 'gzip' } });
    expect(res.status).toBe(415);
    expect(res.headers['accept-encoding']).toBe('identity');
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: 'Content-Encoding "gzip" is not supported; send the body uncompressed', StatusCode: 415 });
  });

  it('refuses a write by a read-only key with 403 before reading its body', async () => {
    const key = f.keys.readOnly;
    expect((await f.request('POST', '/v3/REST/eventcallbackurl', { key, body: '{bad' })).status).toBe(403);
    expect((await f.request('POST', '/v3/REST/eventcallbackurl', { key, body: 'x', headers: { 'content-type': 'text/plain' } })).status).toBe(403);
    expect((await f.request('PUT', '/v3/REST/eventcallbackurl/1', { key, body: '{bad' })).status).toBe(403);
    expect((await f.request('DELETE', '/v3/REST/eventcallbackurl/1', { key })).status).toBe(403);
  });
});
