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

describe('refused requests', () => {
  it('names a parameter Mailjet documents for the resource but this server does not answer (400), in any case or alias', async () => {
    const cases: [string, string][] = [
      ['/v3/REST/toplinkclicked?MessageStatus=1', 'MessageStatus'],
      ['/v3/REST/toplinkclicked?messagestatusid=abc', 'MessageStatus'],
      ['/v3/REST/useragentstatistics?MESSAGESTATUS=2', 'MessageStatus'],
      ['/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&IdentityID=5', 'IdentityID'],
      ['/v3/REST/listrecipientstatistics?TimeZone=Europe/Paris', 'TimeZone'],
      ['/v3/REST/contactstatistics?Recalculate=true', 'Recalculate'],
      ['/v3/REST/contactstatistics/a@b.co?IncludeAnonymized=1', 'IncludeAnonymized'],
    ];
    for (const [path, name] of cases) {
      const r = await f.get(path);
      expect(r.status, path).toBe(400);
      expect(message(r), path).toMatch(new RegExp(`^Invalid parameter ${name}: not supported on `));
    }
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

  it('answers OPTIONS with 405 and the methods the resource takes', async () => {
    for (const [path, allow] of [['/v3/REST/message', 'GET'], ['/v3/REST/message/4242', 'GET'], ['/v3/REST/eventcallbackurl', 'GET, POST']] as const) {
      const r = await f.request('OPTIONS', path);
      expect(r.status, path).toBe(405);
      expect(r.headers['allow'], path).toBe(allow);
    }
  });

  it('refuses a write by a read-only key with 403 before reading its body', async () => {
    const key = f.keys.readOnly;
    expect((await f.request('POST', '/v3/REST/eventcallbackurl', { key, body: '{bad' })).status).toBe(403);
    expect((await f.request('POST', '/v3/REST/eventcallbackurl', { key, body: 'x', headers: { 'content-type': 'text/plain' } })).status).toBe(403);
    expect((await f.request('PUT', '/v3/REST/eventcallbackurl/1', { key, body: '{bad' })).status).toBe(403);
    expect((await f.request('DELETE', '/v3/REST/eventcallbackurl/1', { key })).status).toBe(403);
  });
});
