import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { BIG_N, D10, T0, dataOf, loadMessageEvents } from './message-events-data.js';

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await loadMessageEvents(f);
});
afterAll(async () => f?.close());

const base = { CampaignID: 7, ContactID: 12, ID: 2, IsBlocked: false, IsStatePermanent: false };
const B2A = { ...base, BouncedAt: '2023-11-14T22:13:35Z', StateID: 3 };
const B2B = { ...base, BouncedAt: '2023-11-14T22:13:40Z', IsBlocked: true, IsStatePermanent: true, StateID: 1 };
const B5 = { BouncedAt: '2023-11-24T22:15:00Z', CampaignID: 8, ContactID: 15, ID: 5, IsBlocked: false, IsStatePermanent: false, StateID: 12 };
const BBIG = { BouncedAt: '2023-11-14T22:13:19Z', CampaignID: 7, ContactID: 11, ID: BIG_N, IsBlocked: false, IsStatePermanent: false, StateID: 13 };

const list = async (qs: string) => {
  const res = await f.get(`/v3/REST/bouncestatistics${qs === '' ? '' : `?${qs}`}`);
  expect(res.status, qs).toBe(200);
  return res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
};
const ids = (body: { Data: Record<string, unknown>[] }) => body.Data.map((r) => `${String(r['ID'])}@${String(r['BouncedAt'])}`);

describe('GET /v3/REST/bouncestatistics', () => {
  it('lists every bounce with no implicit date window, by message id, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/bouncestatistics');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ Count: 4, Data: [B2A, B2B, B5, BBIG], Total: 4 });
    expect(Object.keys(dataOf(res.body)[0] ?? {})).toEqual(['BouncedAt', 'CampaignID', 'ContactID', 'ID', 'IsBlocked', 'IsStatePermanent', 'StateID']);
    expect(res.text).toContain('"ID":19421777835146490,');
  });

  it.each([
    ['CampaignID=8', [B5]],
    ['campaignid=7', [B2A, B2B, BBIG]],
    ['ContactsList=3', [B2A, B2B, BBIG]],
    ['ContactsListID=3', [B2A, B2B, BBIG]],
    ['CustomCampaign=autumn-push', [B5]],
    ['From=NEWS@Shop.example', [B2A, B2B, BBIG]],
    ['FromDomain=other.example', [B5]],
    ['FromID=5', [B5]],
    ['FromType=2', [B2A, B2B, B5, BBIG]],
    ['FromType=1', []],
    ['FromType=3', []],
    [`FromTS=${T0}`, [B5]],
    [`ToTS=${T0}`, [B2A, B2B, BBIG]],
    [`FromTS=${T0 - 3600}&ToTS=${T0 - 3599}`, [B2A, B2B, BBIG]],
    ['Period=Year', []],
    ['IsStarred=true', [B2A, B2B, BBIG]],
    ['IsStarred=0', [B5]],
    ['IsDeleted=false', [B2A, B2B, B5, BBIG]],
    ['IsNewsletterTool=true', []],
    ['CampaignStatus=2', [B2A, B2B, B5, BBIG]],
    ['CampaignStatus=-2', []],
    ['MessageStatus=10', [B2A, B2B]],
    ['MessageStatus=9', [B5]],
    ['MessageStatus=5', [B2A, B2B, B5]],
    ['MessageStatus=3', [BBIG]],
    ['MessageStatusID=0', [B2A, B2B, B5, BBIG]],
    [`EventFromTs=${T0 + 16}`, [B2B, B5]],
    [`EventToTs=${T0 + 16}`, [B2A, BBIG]],
    [`EventFromTs=2023-11-14T22:13:35Z&EventToTs=2023-11-14T22:13:40Z`, [B2A]],
    [`EventFromTs=${D10}&CampaignID=7`, []],
  ])('filters with %s', async (qs, expected) => {
    expect(await list(qs)).toEqual({ Count: expected.length, Data: expected, Total: expected.length });
  });

  it('sorts by ID and BouncedAt in both directions, in every spelling', async () => {
    expect(ids(await list('Sort=ID DESC'))).toEqual(ids({ Data: [BBIG, B5, B2A, B2B] }));
    expect(ids(await list('Sort=ID'))).toEqual(ids({ Data: [B2A, B2B, B5, BBIG] }));
    expect(ids(await list('Sort=BouncedAt'))).toEqual(ids({ Data: [BBIG, B2A, B2B, B5] }));
    expect(ids(await list('Sort=bouncedat+desc'))).toEqual(ids({ Data: [B5, B2B, B2A, BBIG] }));
    expect(ids(await list('Sort=ID DESC, BouncedAt DESC'))).toEqual(ids({ Data: [BBIG, B5, B2B, B2A] }));
  });

  it('pages with Limit/Offset, Total counting every match, and counts with countOnly', async () => {
    expect(await list('Limit=1&Offset=1')).toEqual({ Count: 1, Data: [B2B], Total: 4 });
    expect(await list('Limit=2&Offset=3')).toEqual({ Count: 1, Data: [BBIG], Total: 4 });
    expect(await list('Limit=2&Offset=10')).toEqual({ Count: 0, Data: [], Total: 4 });
    expect(await list('countOnly=1')).toEqual({ Count: 4, Data: [], Total: 4 });
    expect(await list('CountOnly=true&CampaignID=7')).toEqual({ Count: 3, Data: [], Total: 3 });
  });

  it('answers every bounce of one message by its id, and a 64-bit id exactly', async () => {
    expect((await f.get('/v3/REST/bouncestatistics/2')).body).toEqual({ Count: 2, Data: [B2A, B2B], Total: 2 });
    const big = await f.get(`/v3/REST/bouncestatistics/19421777835146490`);
    expect(big.body).toEqual({ Count: 1, Data: [BBIG], Total: 1 });
    expect(big.text).toContain('"ID":19421777835146490,');
  });

  it('keeps tenants apart: the other tenant sees its own bounce of message 2, and 404 for ours', async () => {
    const b = await f.get('/v3/REST/bouncestatistics/2', f.keys.b);
    expect(b.body).toEqual({ Count: 1, Data: [{ BouncedAt: '2023-11-14T22:13:50Z', CampaignID: 7, ContactID: 99, ID: 2, IsBlocked: false, IsStatePermanent: true, StateID: 1 }], Total: 1 });
    expect(await f.get('/v3/REST/bouncestatistics/5', f.keys.b)).toMatchObject({ status: 404, body: { ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect(await f.get(`/v3/REST/bouncestatistics/19421777835146490`, f.keys.b)).toMatchObject({ status: 404 });
    expect((await f.get('/v3/REST/bouncestatistics', f.keys.b)).body).toMatchObject({ Count: 1, Total: 1 });
  });

  it('answers 404 for an unknown message and 400 naming ID for a malformed one', async () => {
    expect(await f.get('/v3/REST/bouncestatistics/999')).toMatchObject({ status: 404, body: { StatusCode: 404 } });
    expect(await f.get('/v3/REST/bouncestatistics/3')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/bouncestatistics/abc')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/^Invalid parameter ID:/) } });
  });

  it.each([
    ['CampaignID=x', /CampaignID/],
    ['CampaignID=-1', /CampaignID/],
    ['CampaignID=9223372036854775808', /CampaignID: is beyond/],
    ['ContactsList=1.5', /ContactsList/],
    ['FromType=4', /FromType: must be at most 3/],
    ['FromTS=yesterday', /FromTS/],
    [`FromTS=${T0}&ToTS=${T0}`, /ToTS: must be later than FromTS/],
    ['Period=Decade', /Period: must be one of/],
    ['Period=Day&FromTS=1', /Period/],
    ['IsStarred=maybe', /IsStarred: must be true, false, 1 or 0/],
    ['IsDeleted=2', /IsDeleted/],
    ['CampaignStatus=9', /CampaignStatus/],
    ['MessageStatus=12', /MessageStatus: must be at most 11/],
    ['MessageStatus=sent', /MessageStatus/],
    ['EventFromTs=2024-02-30', /EventFromTs/],
    ['EventToTs=soon', /EventToTs/],
    [`EventFromTs=${T0}&EventToTs=${T0 - 1}`, /EventToTs: must be later than EventFromTs/],
    ['Limit=1001', /Limit/],
    ['Offset=-1', /Offset/],
    ['countOnly=yes', /countOnly/],
    ['Sort=StateID', /Sort: "StateID" is not a sortable property of bouncestatistics; sort by ID, BouncedAt/],
    ['Sort=ID sideways', /Sort/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/bouncestatistics?${qs}`);
    expect(res.status, qs).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
