import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { UA_ID } from '../../unit/projections/scenarios/common.js';
import { BIG, BIG_N, D10, SALE_URL, T0, loadMessageEvents } from './message-events-data.js';

let f: ApiFixture;
let C1: Record<string, unknown>;
let C2: Record<string, unknown>;
let C3: Record<string, unknown>;
let pos: Awaited<ReturnType<typeof loadMessageEvents>>;
beforeAll(async () => {
  f = await openApiFixture();
  pos = await loadMessageEvents(f);
  // Message BIG's time is its queued event (T0 - 2); message 3's its sent (D10).
  C1 = { ClickedAt: '2023-11-14T22:15:20Z', ClickedDelay: 122, ContactID: 11, ID: pos.a['c1'], MessageID: BIG_N, Url: SALE_URL, UserAgentID: Number(UA_ID.chrome) };
  C2 = { ClickedAt: '2023-11-14T22:16:40Z', ClickedDelay: 202, ContactID: 11, ID: pos.a['c2'], MessageID: BIG_N, Url: 'https://shop.example/about', UserAgentID: Number(UA_ID.mail) };
  C3 = { ClickedAt: '2023-11-24T22:14:00Z', ClickedDelay: 40, ContactID: 13, ID: pos.a['c3'], MessageID: 3, Url: 'https://other.example/x', UserAgentID: Number(UA_ID.mail) };
});
afterAll(async () => f?.close());

const list = async (qs: string) => {
  const res = await f.get(`/v3/REST/clickstatistics${qs === '' ? '' : `?${qs}`}`);
  expect(res.status, qs).toBe(200);
  return res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
};
const envelope = (data: Record<string, unknown>[]) => ({ Count: data.length, Data: data, Total: data.length });

describe('GET /v3/REST/clickstatistics', () => {
  it('lists every click with no implicit date window, by ID, the URL as clicked, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/clickstatistics');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(envelope([C1, C2, C3]));
    expect(Object.keys(C1)).toEqual(['ClickedAt', 'ClickedDelay', 'ContactID', 'ID', 'MessageID', 'Url', 'UserAgentID']);
    expect(Object.keys((res.body as { Data: object[] }).Data[0] ?? {})).toEqual(Object.keys(C1));
    expect(res.text).toContain(`"MessageID":${BIG},`);
  });

  it.each<[string, () => Record<string, unknown>[]]>([
    ['CampaignID=8', () => [C3]],
    ['ContactsList=3', () => [C1, C2]],
    ['CustomCampaign=autumn-push', () => [C3]],
    ['From=info@other.example', () => [C3]],
    ['FromDomain=shop.example', () => [C1, C2]],
    ['FromID=9', () => [C1, C2]],
    ['FromType=2', () => [C1, C2, C3]],
    ['FromType=3', () => []],
    [`FromTS=${T0}`, () => [C3]],
    [`ToTS=${T0}`, () => [C1, C2]],
    ['IsStarred=1', () => [C1, C2]],
    ['IsDeleted=true', () => []],
    ['IsNewsletterTool=false', () => [C1, C2, C3]],
    ['CampaignStatus=2', () => [C1, C2, C3]],
    ['Period=Month', () => []],
    [`MessageID=${BIG}`, () => [C1, C2]],
    ['messageid=3', () => [C3]],
    ['MessageID=2', () => []],
    ['MessageStatus=7', () => [C3]],
    ['MessageStatus=3', () => [C1, C2]],
    ['MessageStatus=4', () => []],
    [`EventFromTs=${T0 + 150}`, () => [C2, C3]],
    [`EventToTs=${T0 + 200}`, () => [C1]],
    [`EventFromTs=${T0 + 200}&EventToTs=${D10 + 40}`, () => [C2]],
    [`EventFromTs=2023-11-24T00:00:00`, () => [C3]],
    // A fraction of a second: C1 (22:15:20) is before 22:15:20.5, and not at or after it.
    ['EventFromTs=2023-11-14T22:15:20.5Z', () => [C2, C3]],
    ['EventToTs=2023-11-14T22:15:20.5Z', () => [C1]],
    ['EventToTs=2023-11-14T22:15:20.000Z', () => []],
  ])('filters with %s', async (qs, expected) => {
    expect(await list(qs)).toEqual(envelope(expected()));
  });

  it('sorts by ID and ClickedAt in both directions', async () => {
    expect(await list('Sort=ID DESC')).toEqual(envelope([C3, C2, C1]));
    expect(await list('Sort=ID')).toEqual(envelope([C1, C2, C3]));
    expect(await list('Sort=ClickedAt+DESC')).toEqual(envelope([C3, C2, C1]));
    expect(await list('sort=clickedat asc')).toEqual(envelope([C1, C2, C3]));
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect(await list('Limit=1&Offset=1')).toEqual({ Count: 1, Data: [C2], Total: 3 });
    expect(await list('Limit=2')).toEqual({ Count: 2, Data: [C1, C2], Total: 3 });
    expect(await list('countOnly=1')).toEqual({ Count: 3, Data: [], Total: 3 });
    expect(await list(`countOnly=1&MessageID=${BIG}`)).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it('answers one click by its ID', async () => {
    expect((await f.get(`/v3/REST/clickstatistics/${pos.a['c1']}`)).body).toEqual(envelope([C1]));
    expect((await f.get(`/v3/REST/clickstatistics/${pos.a['c3']}`)).body).toEqual(envelope([C3]));
  });

  it('keeps tenants apart', async () => {
    const own = { ClickedAt: '2023-11-14T22:14:10Z', ClickedDelay: 50, ContactID: 99, ID: pos.b['bc2'], MessageID: 2, Url: 'https://b.example/', UserAgentID: Number(UA_ID.chrome) };
    expect((await f.get(`/v3/REST/clickstatistics/${pos.b['bc2']}`, f.keys.b)).body).toEqual(envelope([own]));
    expect((await f.get('/v3/REST/clickstatistics', f.keys.b)).body).toEqual(envelope([own]));
    expect(await f.get(`/v3/REST/clickstatistics/${pos.b['bc2']}`)).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect(await f.get(`/v3/REST/clickstatistics/${pos.a['c1']}`, f.keys.b)).toMatchObject({ status: 404 });
  });

  it('answers 404 for an unknown click (a non-click event, a huge id) and 400 naming ID for a malformed one', async () => {
    expect(await f.get(`/v3/REST/clickstatistics/${pos.a['o1']}`)).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/clickstatistics/18446744073709551615')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/clickstatistics/-3')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/^Invalid parameter ID:/) } });
  });

  it.each([
    ['MessageID=abc', /MessageID: must be a non-negative whole number/],
    ['MessageID=18446744073709551616', /MessageID: is beyond the 64-bit range/],
    ['CampaignID=', /CampaignID/],
    ['FromID=x', /FromID/],
    ['FromType=0', /FromType/],
    ['ToTS=tomorrow', /ToTS/],
    ['Period=week2', /Period/],
    ['IsNewsletterTool=nope', /IsNewsletterTool/],
    ['MessageStatus=-1', /MessageStatus/],
    ['EventFromTs=x', /EventFromTs/],
    [`EventFromTs=${T0}&EventToTs=${T0}`, /EventToTs/],
    ['Limit=x', /Limit/],
    ['Sort=Url', /Sort: "Url" is not a sortable property of clickstatistics; sort by ID, ClickedAt/],
    ['From=%00', /From: must not contain NUL/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/clickstatistics?${qs}`);
    expect(res.status, qs).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
