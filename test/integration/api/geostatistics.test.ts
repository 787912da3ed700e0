import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000;
const BIG = '9007199254740993';

const msg = (id: string, dims: Record<string, unknown>) => (event: string, time: number, geo: string) => ({
  event, time, MessageID: id, email: `m${id}@example.org`, geo, ...(event === 'click' ? { url: 'https://x.example/' } : {}), ...dims,
});

beforeAll(async () => {
  f = await openApiFixture();
  const m1 = msg('1', { mj_campaign_id: 7 });
  const m2 = msg('2', { mj_campaign_id: 7 });
  const m3 = msg('3', { mj_campaign_id: 8, mj_list_id: 3 });
  const m4 = msg('4', { mj_campaign_id: BIG });
  const m5 = msg('5', {});
  await f.given(f.keys.a, [
    m1('open', T0, 'FR'), m1('open', T0 + 1, 'FR'), m1('click', T0 + 2, 'FR'), m1('open', T0 + 3, 'US'),
    m2('open', T0, 'fr'), m2('click', T0 + 1, 'DE'),
    m3('open', T0, 'US'),
    m4('click', T0, 'JP'),
    m5('open', T0, 'FR'),
  ]);
  await f.given(f.keys.b, [msg('1', { mj_campaign_id: 7 })('open', T0, 'IT')]);
});
afterAll(async () => f?.close());

const geo = (Country: string, OpenedCount: number, ClickedCount: number) => ({ ClickedCount, Country, OpenedCount });
const body = <T>(rows: T[], total = rows.length) => ({ Count: rows.length, Data: rows, Total: total });

describe('GET /v3/REST/geostatistics', () => {
  it('gives opened and clicked messages per country', async () => {
    const res = await f.get('/v3/REST/geostatistics');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body([geo('DE', 0, 1), geo('FR', 3, 1), geo('JP', 0, 1), geo('US', 2, 0)]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(['ClickedCount', 'Country', 'OpenedCount']);
  });

  it.each([
    ['CampaignID=7', [geo('DE', 0, 1), geo('FR', 2, 1), geo('US', 1, 0)]],
    [`CampaignID=${BIG}`, [geo('JP', 0, 1)]],
    ['CampaignID=9007199254740992', []],
    ['FromType=3', [geo('FR', 1, 0)]],
    ['ContactsList=3', [geo('US', 1, 0)]],
    ['ContactsListID=3', [geo('US', 1, 0)]],
    ['CampaignStatus=2', [geo('DE', 0, 1), geo('FR', 2, 1), geo('JP', 0, 1), geo('US', 2, 0)]],
    ['CampaignStatus=0', []],
  ])('filters with %s', async (qs, rows) => {
    const res = await f.get(`/v3/REST/geostatistics?${qs}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body(rows));
  });

  it('answers the item form /{Country} with the list’s filters; 404 for an unknown or another tenant’s country', async () => {
    expect((await f.get('/v3/REST/geostatistics/FR')).body).toEqual(body([geo('FR', 3, 1)]));
    expect((await f.get('/v3/REST/geostatistics/fr?CampaignID=7')).body).toEqual(body([geo('FR', 2, 1)]));
    expect(await f.get('/v3/REST/geostatistics/XX')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect((await f.get('/v3/REST/geostatistics/JP?CampaignID=7')).status).toBe(404);
    expect((await f.get('/v3/REST/geostatistics/FR', f.keys.b)).status).toBe(404);
    expect((await f.get('/v3/REST/geostatistics/IT')).status).toBe(404);
    expect((await f.get('/v3/REST/geostatistics/IT', f.keys.b)).body).toEqual(body([geo('IT', 1, 0)]));
    expect((await f.get('/v3/REST/geostatistics/FR?MessageStatus=3')).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter MessageStatus/), StatusCode: 400 });
  });

  it('sorts by Country, OpenedCount and ClickedCount, pages and counts', async () => {
    const countries = async (qs: string) => ((await f.get(`/v3/REST/geostatistics?${qs}`)).body as { Data: { Country: string }[] }).Data.map((r) => r.Country);
    expect(await countries('Sort=Country DESC')).toEqual(['US', 'JP', 'FR', 'DE']);
    expect(await countries('Sort=OpenedCount+DESC')).toEqual(['FR', 'US', 'DE', 'JP']);
    expect(await countries('Sort=OpenedCount')).toEqual(['DE', 'JP', 'US', 'FR']);
    expect(await countries('Sort=ClickedCount, Country DESC')).toEqual(['US', 'JP', 'FR', 'DE']);
    expect((await f.get('/v3/REST/geostatistics?Limit=2&Offset=1')).body).toEqual(body([geo('FR', 3, 1), geo('JP', 0, 1)], 4));
    expect((await f.get('/v3/REST/geostatistics?countOnly=1&CampaignID=7')).body).toEqual({ Count: 3, Data: [], Total: 3 });
    expect((await f.get('/v3/REST/geostatistics', f.keys.b)).body).toEqual(body([geo('IT', 1, 0)]));
  });

  it.each([
    ['MessageStatus=3', /Invalid parameter MessageStatus: not available on geostatistics/],
    ['MessageStatusID=1', /Invalid parameter MessageStatus/],
    ['MessageStatus=12', /Invalid parameter MessageStatus: must be at most 11/],
    ['CampaignID=x', /Invalid parameter CampaignID/],
    ['ContactsList=1e3', /Invalid parameter ContactsList/],
    ['FromType=0', /Invalid parameter FromType/],
    ['IsNewsletterTool=perhaps', /Invalid parameter IsNewsletterTool/],
    ['FromTS=2024-01-01T00:00:00Z&ToTS=2023-01-01', /Invalid parameter ToTS/],
    ['Sort=Count', /Invalid parameter Sort: "Count" is not a sortable property of geostatistics/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/geostatistics?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
