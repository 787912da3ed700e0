import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stableId } from '../../../projections/kit/ids.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { BIG_MESSAGE_ID } from '../../support/events.js';
import { LINK_ID } from '../../unit/projections/scenarios/common.js';

/** statistics/link-click and toplinkclicked: the same clicks, per campaign and per link. */

let f: ApiFixture;
const T0 = 1_700_000_000;
const MAX_CAMPAIGN = '9223372036854775807'; // the largest int8
const SALE = 'https://shop.example.com/sale?a=1&b=2';
const ABOUT = 'https://shop.example.com/about';
const OTHER = 'https://other.example/x';
const ID = { sale: Number(LINK_ID.sale), about: Number(LINK_ID.about), other: Number(stableId(`url:${OTHER}`)) };

const msg = (id: string, dims: Record<string, unknown>) => (event: string, time: number, extra: Record<string, unknown> = {}) => ({
  event, time, MessageID: id, email: `m${id.slice(-2)}@example.org`, ...dims, ...extra,
});

beforeAll(async () => {
  f = await openApiFixture();
  const m1 = msg(BIG_MESSAGE_ID, { mj_campaign_id: 7, mj_contact_id: 21, sender: 'news@shop.example.com' });
  const m2 = msg('2', { mj_campaign_id: 7, mj_contact_id: 22, sender: 'news@shop.example.com' });
  const m3 = msg('3', { mj_campaign_id: 8, mj_contact_id: 21, mj_list_id: 3, mj_sender_id: 9, customcampaign: 'promo' });
  const m4 = msg('4', { mj_contact_id: 23 });
  const m5 = msg('5', { mj_campaign_id: MAX_CAMPAIGN, mj_contact_id: 24 });
  await f.given(f.keys.a, [
    { event: 'campaign', time: T0 - 60, mj_campaign_id: 7, Title: 'Sale', IDType: 'Campaign', Status: 2, SendTimeStart: T0, Starred: true },
    m1('sent', T0), m1('click', T0 + 10, { url: 'https://Shop.Example.com/sale?b=2&a=1&utm_source=nl' }), m1('click', T0 + 20, { url: SALE }), m1('click', T0 + 30, { url: ABOUT }),
    m2('sent', T0 + 1), m2('click', T0 + 40, { url: SALE }),
    m3('sent', T0 + 100), m3('click', T0 + 110, { url: ABOUT }), m3('click', T0 + 120, { url: `${ABOUT}?utm_campaign=x` }),
    m4('sent', T0 + 150), m4('click', T0 + 160, { url: OTHER }),
    m5('sent', T0 + 200), m5('click', T0 + 210, { url: SALE }),
  ]);
  await f.given(f.keys.b, [msg('2', { mj_campaign_id: 7, mj_contact_id: 21 })('click', T0, { url: 'https://b.example/' })]);
});
afterAll(async () => f?.close());

const body = <T>(rows: T[], total = rows.length) => ({ Count: rows.length, Data: rows, Total: total });
const top = (id: number, url: string, count: number) => ({ ClickedCount: count, ID: id, LinkId: id, Url: url });

describe('GET /v3/REST/statistics/link-click', () => {
  it('gives clicked messages and events per link of the campaign, ranked by LinkId', async () => {
    const res = await f.get('/v3/REST/statistics/link-click?CampaignID=7');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body([
      { URL: SALE, PositionIndex: 1, ClickedMessagesCount: 2, ClickedEventsCount: 3 },
      { URL: ABOUT, PositionIndex: 2, ClickedMessagesCount: 1, ClickedEventsCount: 1 },
    ]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(['URL', 'PositionIndex', 'ClickedMessagesCount', 'ClickedEventsCount']);
    expect((await f.get('/v3/REST/statistics/link-click?campaignid=8')).body).toEqual(body([{ URL: ABOUT, PositionIndex: 1, ClickedMessagesCount: 1, ClickedEventsCount: 2 }]));
    expect((await f.get(`/v3/REST/statistics/link-click?CampaignId=${MAX_CAMPAIGN}`)).body).toEqual(body([{ URL: SALE, PositionIndex: 1, ClickedMessagesCount: 1, ClickedEventsCount: 1 }]));
    expect((await f.get('/v3/REST/statistics/link-click?CampaignID=99')).body).toEqual(body([]));
  });

  it('keeps tenants apart', async () => {
    expect((await f.get('/v3/REST/statistics/link-click?CampaignID=7', f.keys.b)).body).toEqual(body([{ URL: 'https://b.example/', PositionIndex: 1, ClickedMessagesCount: 1, ClickedEventsCount: 1 }]));
    expect((await f.get('/v3/REST/statistics/link-click?CampaignID=8', f.keys.b)).body).toEqual(body([]));
  });

  it('sorts, pages and counts; PositionIndex stays the rank in the campaign', async () => {
    const urls = async (qs: string) => ((await f.get(`/v3/REST/statistics/link-click?CampaignID=7&${qs}`)).body as { Data: { URL: string; PositionIndex: number }[] }).Data.map((r) => `${r.PositionIndex}:${r.URL === SALE ? 'sale' : 'about'}`);
    expect(await urls('Sort=PositionIndex+DESC')).toEqual(['2:about', '1:sale']);
    expect(await urls('Sort=URL')).toEqual(['2:about', '1:sale']);
    expect(await urls('Sort=url%20desc')).toEqual(['1:sale', '2:about']);
    expect(await urls('Sort=ClickedEventsCount')).toEqual(['2:about', '1:sale']);
    expect(await urls('Sort=ClickedMessagesCount DESC')).toEqual(['1:sale', '2:about']);
    expect((await f.get('/v3/REST/statistics/link-click?CampaignID=7&Limit=1&Offset=1')).body).toEqual(body([{ URL: ABOUT, PositionIndex: 2, ClickedMessagesCount: 1, ClickedEventsCount: 1 }], 2));
    expect((await f.get('/v3/REST/statistics/link-click?CampaignID=7&countOnly=1')).body).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it.each([
    ['', /Missing parameter CampaignID/],
    ['CampaignID=', /Invalid parameter CampaignID/],
    ['CampaignID=abc', /Invalid parameter CampaignID: must be a non-negative whole number/],
    ['CampaignID=9223372036854775808', /Invalid parameter CampaignID: is beyond the signed 64-bit range/],
    ['CampaignID=7&Sort=LinkId', /Invalid parameter Sort: "LinkId" is not a sortable property of statistics\/link-click/],
    ['CampaignID=7&Limit=-1', /Invalid parameter Limit/],
  ])('answers 400 naming the parameter for "%s"', async (qs, message) => {
    const res = await f.get(`/v3/REST/statistics/link-click?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});

describe('GET /v3/REST/toplinkclicked', () => {
  it('gives clicking messages per link, top links first', async () => {
    const res = await f.get('/v3/REST/toplinkclicked');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body([top(ID.sale, SALE, 3), top(ID.about, ABOUT, 2), top(ID.other, OTHER, 1)]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(['ClickedCount', 'ID', 'LinkId', 'Url']);
    expect((await f.get('/v3/REST/toplinkclicked?ActualClicks=true')).body).toEqual(body([top(ID.sale, SALE, 4), top(ID.about, ABOUT, 3), top(ID.other, OTHER, 1)]));
  });

  it.each([
    ['CampaignID=7', [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['CampaignID=7&ActualClicks=1', [top(ID.sale, SALE, 3), top(ID.about, ABOUT, 1)]],
    [`CampaignID=${MAX_CAMPAIGN}`, [top(ID.sale, SALE, 1)]],
    ['CustomCampaign=promo', [top(ID.about, ABOUT, 1)]],
    ['ContactsList=3', [top(ID.about, ABOUT, 1)]],
    ['ContactsListID=3&ActualClicks=true', [top(ID.about, ABOUT, 2)]],
    ['FromID=9', [top(ID.about, ABOUT, 1)]],
    ['From=NEWS@shop.example.com', [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['FromDomain=shop.example.com', [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['FromType=3', [top(ID.other, OTHER, 1)]],
    ['FromType=2', [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['FromType=1', [top(ID.sale, SALE, 1), top(ID.about, ABOUT, 1)]],
    ['IsStarred=true', [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['CampaignStatus=2', [top(ID.sale, SALE, 3), top(ID.about, ABOUT, 2)]],
    [`FromTS=${T0 + 50}`, [top(ID.sale, SALE, 1), top(ID.about, ABOUT, 1)]],
    [`FromTS=${T0}&ToTS=${T0 + 150}`, [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 2)]],
    ['Contact=21', [top(ID.about, ABOUT, 2), top(ID.sale, SALE, 1)]],
    ['Contact=21&ActualClicks=true', [top(ID.about, ABOUT, 3), top(ID.sale, SALE, 2)]],
    ['ContactID=21&CampaignID=8', [top(ID.about, ABOUT, 1)]],
    ['Contact=23', [top(ID.other, OTHER, 1)]],
    [`Message=${BIG_MESSAGE_ID}`, [top(ID.sale, SALE, 1), top(ID.about, ABOUT, 1)]],
    [`MessageID=${BIG_MESSAGE_ID}&ActualClicks=true`, [top(ID.sale, SALE, 2), top(ID.about, ABOUT, 1)]],
    ['Message=19421777835146491', []],
    ['Message=18446744073709551615', []],
    ['Contact=99', []],
  ])('filters with %s', async (qs, rows) => {
    const res = await f.get(`/v3/REST/toplinkclicked?${qs}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body(rows));
  });

  it('answers the item form /{ID} with the list’s filters; 404 for an unknown or another tenant’s link', async () => {
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.sale}`)).body).toEqual(body([top(ID.sale, SALE, 3)]));
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.sale}?CampaignID=7&ActualClicks=true`)).body).toEqual(body([top(ID.sale, SALE, 3)]));
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.about}?Contact=21`)).body).toEqual(body([top(ID.about, ABOUT, 2)]));
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.sale}?CampaignID=8`)).status).toBe(404);
    expect(await f.get('/v3/REST/toplinkclicked/999')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.sale}`, f.keys.b)).status).toBe(404);
    const bLink = Number(stableId('url:https://b.example/'));
    expect((await f.get(`/v3/REST/toplinkclicked/${bLink}`)).status).toBe(404);
    expect((await f.get(`/v3/REST/toplinkclicked/${bLink}`, f.keys.b)).body).toEqual(body([top(bLink, 'https://b.example/', 1)]));
    expect((await f.get('/v3/REST/toplinkclicked/abc')).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter ID/), StatusCode: 400 });
    expect((await f.get(`/v3/REST/toplinkclicked/${ID.sale}?Contact=x`)).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter Contact/), StatusCode: 400 });
  });

  it('sorts by ID / LinkId, ClickedCount and Url, both directions', async () => {
    const byId = [ID.sale, ID.about, ID.other].sort((x, y) => x - y);
    const ids = async (sort: string, extra = '') =>
      ((await f.get(`/v3/REST/toplinkclicked?Sort=${encodeURIComponent(sort)}${extra}`)).body as { Data: { ID: number }[] }).Data.map((r) => r.ID);
    expect(await ids('ID')).toEqual(byId);
    expect(await ids('ID DESC')).toEqual([...byId].reverse());
    expect(await ids('LinkId desc')).toEqual([...byId].reverse());
    expect(await ids('ClickedCount')).toEqual([ID.other, ID.about, ID.sale]);
    expect(await ids('ClickedCount DESC')).toEqual([ID.sale, ID.about, ID.other]);
    expect(await ids('Url')).toEqual([ID.other, ID.about, ID.sale]);
    expect(await ids('Url+DESC')).toEqual([ID.sale, ID.about, ID.other]);
    expect(await ids('ClickedCount', '&Contact=21')).toEqual([ID.sale, ID.about]);
    expect(await ids('ID DESC', '&Contact=21')).toEqual([ID.sale, ID.about].sort((x, y) => y - x));
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect((await f.get('/v3/REST/toplinkclicked?Limit=1&Offset=1')).body).toEqual(body([top(ID.about, ABOUT, 2)], 3));
    expect((await f.get('/v3/REST/toplinkclicked?Limit=1&Offset=1&Contact=21')).body).toEqual(body([top(ID.sale, SALE, 1)], 2));
    expect((await f.get('/v3/REST/toplinkclicked?countOnly=1')).body).toEqual({ Count: 3, Data: [], Total: 3 });
    expect((await f.get('/v3/REST/toplinkclicked?countOnly=1&Contact=21')).body).toEqual({ Count: 2, Data: [], Total: 2 });
    expect((await f.get('/v3/REST/toplinkclicked', f.keys.b)).body).toEqual(body([top(Number(stableId('url:https://b.example/')), 'https://b.example/', 1)]));
  });

  it.each([
    ['ActualClicks=maybe', /Invalid parameter ActualClicks/],
    ['Contact=x', /Invalid parameter Contact: must be a non-negative whole number/],
    ['Message=-1', /Invalid parameter Message/],
    ['Message=18446744073709551616', /Invalid parameter Message: is beyond the 64-bit range/],
    ['CampaignID=1.5', /Invalid parameter CampaignID/],
    ['CampaignStatus=9', /Invalid parameter CampaignStatus: must be at most 4/],
    ['FromType=4', /Invalid parameter FromType/],
    ['Period=Decade', /Invalid parameter Period: must be one of Day, Week, Month, Year/],
    ['Period=Day&FromTS=1', /Invalid parameter Period/],
    ['FromTS=soon', /Invalid parameter FromTS/],
    [`FromTS=${T0}&ToTS=${T0}`, /Invalid parameter ToTS/],
    ['IsDeleted=2', /Invalid parameter IsDeleted/],
    ['Sort=PositionIndex', /Invalid parameter Sort: "PositionIndex" is not a sortable property of toplinkclicked/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/toplinkclicked?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});

describe('toplinkclicked per contact on embedded PGlite', () => {
  it('computes LinkId in SQL exactly as link-clicks does', async () => {
    const p = await openApiFixture({ dialect: 'pglite' });
    try {
      await p.given(p.keys.a, [{ event: 'click', time: T0, MessageID: '1', email: 'a@example.org', mj_contact_id: 5, url: SALE }]);
      const expected = body([top(ID.sale, SALE, 1)]);
      expect((await p.get('/v3/REST/toplinkclicked?Contact=5')).body).toEqual(expected);
      expect((await p.get('/v3/REST/toplinkclicked')).body).toEqual(expected);
    } finally {
      await p.close();
    }
  });
});
