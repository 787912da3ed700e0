import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { UA_CHROME, UA_MAIL, UA_PROXY } from '../../unit/projections/scenarios/common.js';

let f: ApiFixture;
const T0 = 1_700_000_000;
const BIG = '9007199254740993';

const msg = (id: string, dims: Record<string, unknown>) => (event: string, time: number, agent: string) => ({
  event, time, MessageID: id, email: `m${id}@example.org`, agent, ...(event === 'click' ? { url: 'https://x.example/' } : {}), ...dims,
});

beforeAll(async () => {
  f = await openApiFixture();
  const m1 = msg('1', { mj_campaign_id: 7 });
  const m2 = msg('2', { mj_campaign_id: 7 });
  const m3 = msg('3', { mj_campaign_id: 8, mj_list_id: 3, customcampaign: 'promo' });
  const m4 = msg('4', {});
  const m5 = msg('5', { mj_campaign_id: 7 });
  const m6 = msg('6', { mj_campaign_id: BIG });
  await f.given(f.keys.a, [
    { event: 'campaign', time: T0, mj_campaign_id: 7, Title: 'Seven', Status: 2, Starred: true },
    m1('open', T0, UA_MAIL), m1('open', T0 + 1, UA_MAIL), m1('click', T0 + 2, UA_CHROME),
    m2('open', T0, UA_MAIL), m2('open', T0 + 1, UA_PROXY),
    m3('open', T0, UA_CHROME), m3('open', T0 + 1, UA_CHROME), m3('open', T0 + 2, UA_CHROME), m3('click', T0 + 3, UA_CHROME),
    m4('open', T0, UA_MAIL),
    m5('click', T0, UA_MAIL),
    m6('open', T0, UA_PROXY),
  ]);
  await f.given(f.keys.b, [msg('1', { mj_campaign_id: 7 })('open', T0, UA_CHROME)]);
});
afterAll(async () => f?.close());

const ua = (Platform: string, UserAgent: string, Count: number, DistinctCount: number) => ({ Count, DistinctCount, Platform, UserAgent });
const MAIL = (c: number, d: number) => ua('iOS', 'Apple Mail', c, d);
const CHROME = (c: number, d: number) => ua('Windows', 'Chrome', c, d);
const PROXY = (c: number, d: number) => ua('Other', 'Gmail Image Proxy', c, d);
const body = <T>(rows: T[], total = rows.length) => ({ Count: rows.length, Data: rows, Total: total });

describe('GET /v3/REST/useragentstatistics', () => {
  it('gives open events and opened messages per platform and client, most used first', async () => {
    const res = await f.get('/v3/REST/useragentstatistics');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body([MAIL(4, 3), CHROME(3, 1), PROXY(2, 2)]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(['Count', 'DistinctCount', 'Platform', 'UserAgent']);
    expect((await f.get('/v3/REST/useragentstatistics?Event=open')).body).toEqual(body([MAIL(4, 3), CHROME(3, 1), PROXY(2, 2)]));
    expect((await f.get('/v3/REST/useragentstatistics?Event=CLICK')).body).toEqual(body([CHROME(2, 2), MAIL(1, 1)]));
  });

  it.each([
    ['CampaignID=7', [MAIL(3, 2), PROXY(1, 1)]],
    ['CampaignID=7&Event=click', [CHROME(1, 1), MAIL(1, 1)]],
    [`CampaignID=${BIG}`, [PROXY(1, 1)]],
    ['CampaignID=9007199254740992', []],
    ['ContactsList=3', [CHROME(3, 1)]],
    ['CustomCampaign=promo&Event=click', [CHROME(1, 1)]],
    ['FromType=3', [MAIL(1, 1)]],
    ['IsStarred=true', [MAIL(3, 2), PROXY(1, 1)]],
    // The message sent without a campaign (FromType=3) is in no starred campaign.
    ['IsStarred=false', [CHROME(3, 1), PROXY(1, 1), MAIL(1, 1)]],
    ['Platform=ios', [MAIL(4, 3)]],
    ['Platform=Windows&Event=click', [CHROME(2, 2)]],
    ['ExcludePlatform=iOS', [CHROME(3, 1), PROXY(2, 2)]],
    ['ExcludePlatform=windows&Platform=Other', [PROXY(2, 2)]],
    ['Platform=Android', []],
  ])('filters with %s', async (qs, rows) => {
    const res = await f.get(`/v3/REST/useragentstatistics?${qs}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body(rows));
  });

  it('keeps tenants apart', async () => {
    expect((await f.get('/v3/REST/useragentstatistics', f.keys.b)).body).toEqual(body([CHROME(1, 1)]));
    expect((await f.get(`/v3/REST/useragentstatistics?CampaignID=${BIG}`, f.keys.b)).body).toEqual(body([]));
  });

  it('sorts by Count, DistinctCount and UserAgent, pages and counts', async () => {
    const clients = async (qs: string) => ((await f.get(`/v3/REST/useragentstatistics?${qs}`)).body as { Data: { UserAgent: string }[] }).Data.map((r) => r.UserAgent);
    expect(await clients('Sort=Count')).toEqual(['Gmail Image Proxy', 'Chrome', 'Apple Mail']);
    expect(await clients('Sort=DistinctCount+DESC')).toEqual(['Apple Mail', 'Gmail Image Proxy', 'Chrome']);
    expect(await clients('Sort=DistinctCount')).toEqual(['Chrome', 'Gmail Image Proxy', 'Apple Mail']);
    expect(await clients('Sort=UserAgent')).toEqual(['Apple Mail', 'Chrome', 'Gmail Image Proxy']);
    expect(await clients('Sort=useragent%20desc')).toEqual(['Gmail Image Proxy', 'Chrome', 'Apple Mail']);
    expect(await clients('Sort=Platform&ExcludePlatform=iOS')).toEqual(['Gmail Image Proxy', 'Chrome']);
    expect((await f.get('/v3/REST/useragentstatistics?Limit=1&Offset=1')).body).toEqual(body([CHROME(3, 1)], 3));
    expect((await f.get('/v3/REST/useragentstatistics?countOnly=1&Event=click')).body).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it.each([
    ['Event=bounce', /Invalid parameter Event: must be one of open, click/],
    ['Platform=%00', /Invalid parameter Platform/],
    [`ExcludePlatform=${'x'.repeat(101)}`, /Invalid parameter ExcludePlatform/],
    ['CampaignID=abc', /Invalid parameter CampaignID/],
    ['FromID=-1', /Invalid parameter FromID/],
    ['IsStarred=sometimes', /Invalid parameter IsStarred/],
    ['Period=Fortnight', /Invalid parameter Period/],
    ['ToTS=never', /Invalid parameter ToTS/],
    ['Sort=Country', /Invalid parameter Sort: "Country" is not a sortable property of useragentstatistics/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/useragentstatistics?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
