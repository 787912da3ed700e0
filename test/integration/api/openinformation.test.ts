import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { UA_CHROME, UA_ID, UA_MAIL } from '../../unit/projections/scenarios/common.js';
import { BIG, BIG_N, D10, T0, loadMessageEvents } from './message-events-data.js';

let f: ApiFixture;
let OBIG: Record<string, unknown>;
let O3: Record<string, unknown>;
beforeAll(async () => {
  f = await openApiFixture();
  await loadMessageEvents(f);
  // ArrivedAt is the first `sent`; OpenedAt and the user agent are the first open's.
  OBIG = { ArrivedAt: '2023-11-14T22:13:20Z', CampaignID: 7, ContactID: 11, ID: BIG_N, MessageID: BIG_N, OpenedAt: '2023-11-14T22:14:20Z', UserAgentFull: UA_CHROME, UserAgentID: Number(UA_ID.chrome) };
  O3 = { ArrivedAt: '2023-11-24T22:13:20Z', CampaignID: 8, ContactID: 13, ID: 3, MessageID: 3, OpenedAt: '2023-11-24T22:13:50Z', UserAgentFull: UA_MAIL, UserAgentID: Number(UA_ID.mail) };
});
afterAll(async () => f?.close());

const list = async (qs: string, key = f.keys.a) => {
  const res = await f.get(`/v3/REST/openinformation${qs === '' ? '' : `?${qs}`}`, key);
  expect(res.status, qs).toBe(200);
  return res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
};
const envelope = (data: Record<string, unknown>[]) => ({ Count: data.length, Data: data, Total: data.length });

describe('GET /v3/REST/openinformation', () => {
  it('lists every opened message once, from its first open, with no implicit date window, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/openinformation');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(envelope([O3, OBIG]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] ?? {})).toEqual(['ArrivedAt', 'CampaignID', 'ContactID', 'ID', 'MessageID', 'OpenedAt', 'UserAgentFull', 'UserAgentID']);
    expect(res.text).toContain(`"MessageID":${BIG},`);
  });

  it.each<[string, () => Record<string, unknown>[]]>([
    ['CampaignID=7', () => [OBIG]],
    ['ContactsList=3', () => [OBIG]],
    ['CustomCampaign=autumn-push', () => [O3]],
    ['From=news@shop.example', () => [OBIG]],
    ['FromDomain=OTHER.example', () => [O3]],
    ['FromID=5', () => [O3]],
    ['FromType=2', () => [O3, OBIG]],
    ['FromType=3', () => []],
    [`FromTS=${T0}`, () => [O3]],
    [`ToTS=${T0}`, () => [OBIG]],
    ['IsStarred=false', () => [O3]],
    ['IsDeleted=0', () => [O3, OBIG]],
    ['IsNewsletterTool=1', () => []],
    ['CampaignStatus=2', () => [O3, OBIG]],
    ['Period=Week', () => []],
    [`MessageID=${BIG}`, () => [OBIG]],
    ['MessageID=3', () => [O3]],
    ['MessageID=2', () => []],
    ['MessageStatus=3', () => [OBIG]],
    ['MessageStatus=7', () => [O3]],
    ['MessageStatus=1', () => []],
    // On the first open only: BIG's second open (T0 + 90 000) does not make it match.
    [`EventFromTs=${T0 + 61}`, () => [O3]],
    [`EventToTs=${T0 + 61}`, () => [OBIG]],
    [`EventFromTs=${T0 + 60}&EventToTs=${D10 + 30}`, () => [OBIG]],
    ['EventFromTs=2023-11-24T22:13:50%2B00:00', () => [O3]],
  ])('filters with %s', async (qs, expected) => {
    expect(await list(qs)).toEqual(envelope(expected()));
  });

  it('sorts by ID, OpenedAt and ArrivedAt in both directions', async () => {
    expect(await list('Sort=ID DESC')).toEqual(envelope([OBIG, O3]));
    expect(await list('Sort=ID')).toEqual(envelope([O3, OBIG]));
    expect(await list('Sort=OpenedAt DESC')).toEqual(envelope([O3, OBIG]));
    expect(await list('Sort=openedat')).toEqual(envelope([OBIG, O3]));
    expect(await list('Sort=ArrivedAt+DESC')).toEqual(envelope([O3, OBIG]));
    expect(await list('Sort=ArrivedAt ASC')).toEqual(envelope([OBIG, O3]));
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect(await list('Limit=1')).toEqual({ Count: 1, Data: [O3], Total: 2 });
    expect(await list('Limit=1&Offset=1')).toEqual({ Count: 1, Data: [OBIG], Total: 2 });
    expect(await list('countOnly=true')).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it('answers one message by its message id, a 64-bit one exactly', async () => {
    const big = await f.get(`/v3/REST/openinformation/${BIG}`);
    expect(big.body).toEqual(envelope([OBIG]));
    expect(big.text).toContain(`"MessageID":${BIG},`);
    expect((await f.get('/v3/REST/openinformation/3')).body).toEqual(envelope([O3]));
  });

  it('finds every listed record again at /openinformation/{its ID}', async () => {
    const listed = await f.get('/v3/REST/openinformation');
    expect(listed.status).toBe(200);
    const ids = [...listed.text.matchAll(/"ID":(\d+)/g)].map((m) => m[1]);
    expect(ids).toEqual(['3', BIG]);
    for (const id of ids) {
      const one = await f.get(`/v3/REST/openinformation/${id}`);
      expect(one.status, id).toBe(200);
      expect(one.text).toContain(`"ID":${id},`);
    }
  });

  it('keeps tenants apart, and gives "" for ArrivedAt before a delivery event', async () => {
    const b2 = { ArrivedAt: '2023-11-14T22:13:20Z', CampaignID: 7, ContactID: 99, ID: 2, MessageID: 2, OpenedAt: '2023-11-14T22:14:00Z', UserAgentFull: UA_CHROME, UserAgentID: Number(UA_ID.chrome) };
    const b6 = { ArrivedAt: '', CampaignID: 0, ContactID: 97, ID: 6, MessageID: 6, OpenedAt: '2023-11-14T22:14:30Z', UserAgentFull: UA_MAIL, UserAgentID: Number(UA_ID.mail) };
    expect(await list('', f.keys.b)).toEqual(envelope([b2, b6]));
    expect((await f.get('/v3/REST/openinformation/2', f.keys.b)).body).toEqual(envelope([b2]));
    // Message 2 was opened in tenant b only; BIG in tenant a only.
    expect(await f.get('/v3/REST/openinformation/2')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect(await f.get(`/v3/REST/openinformation/${BIG}`, f.keys.b)).toMatchObject({ status: 404 });
  });

  it('answers 404 for an unknown message and 400 naming ID for a malformed one', async () => {
    expect(await f.get('/v3/REST/openinformation/4')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/openinformation/18446744073709551615')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/openinformation/18446744073709551616')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found' } });
    expect(await f.get('/v3/REST/openinformation/1e3')).toMatchObject({ status: 400 });
  });

  it.each([
    ['MessageID=-2', /MessageID/],
    ['CampaignID=abc', /CampaignID/],
    ['ContactsList=x', /ContactsList/],
    ['FromType=9', /FromType/],
    ['FromTS=2024-13-01', /FromTS/],
    ['Period=Day&ToTS=1', /Period/],
    ['IsStarred=yes', /IsStarred/],
    ['MessageStatus=x', /MessageStatus/],
    ['EventFromTs=1e9', /EventFromTs/],
    ['EventToTs=now', /EventToTs/],
    [`EventFromTs=${D10}&EventToTs=${T0}`, /EventToTs: must be later than EventFromTs/],
    ['Limit=5000', /Limit/],
    ['Sort=UserAgentID', /Sort: "UserAgentID" is not a sortable property of openinformation; sort by ID, OpenedAt, ArrivedAt/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/openinformation?${qs}`);
    expect(res.status, qs).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
