import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000;
const BIG = '9007199254740993'; // 2^53 + 1: a double would read it as …992

const msg = (id: string, campaign: string | number, email: string) => (event: string, time: number, extra: Record<string, unknown> = {}) => ({
  event, time, MessageID: id, email, mj_campaign_id: campaign, ...extra,
});
const meta = (campaign: number, time: number, fields: Record<string, unknown>) => ({ event: 'campaign', time, mj_campaign_id: campaign, ...fields });
const bounce = { hard_bounce: true, blocked: false, error_related_to: 'recipient', error: 'user unknown' };

beforeAll(async () => {
  f = await openApiFixture();
  const m1 = msg('101', 7, 'ann@gmail.com');
  const m2 = msg('102', 7, 'bob@yahoo.com');
  const m3 = msg('103', 7, 'cid@example.org');
  const m4 = msg('104', BIG, 'dee@example.org');
  const m5 = msg('105', BIG, 'eve@example.org');
  await f.given(f.keys.a, [
    meta(7, T0 - 7200, { Title: 'Spring sale', Subject: 'Everything MUST go', IDType: 'Campaign', Status: 2, SendTimeStart: T0 - 3600, Starred: true, EditMode: 'html', EditType: 'full' }),
    m1('sent', T0), m1('open', T0 + 60), m1('click', T0 + 90, { url: 'https://shop.example.com/' }),
    m2('sent', T0 + 5), m2('open', T0 + 70),
    m3('bounce', T0 + 8, bounce),
    m4('sent', T0 + 100), m5('queued', T0 + 50),
    meta(20, T0, { Title: 'Draft newsletter', Subject: 'Hello world', IDType: 'NL', Status: 0, Starred: false, EditMode: 'tool', EditType: 'full' }),
    meta(21, T0, { Title: 'A/B', Subject: 'AB test', IDType: 'AX', Status: 1, SendTimeStart: T0 + 86_400 }),
    meta(22, T0, { Title: 'Old', Subject: 'old news', IDType: 'Campaign', Status: -1, SendTimeStart: T0 - 86_400 }),
    meta(23, T0, { Title: 'Gone', Subject: 'gone', IDType: 'NL', Status: -2 }),
  ]);
  const b = msg('101', 7, 'zed@gmail.com');
  await f.given(f.keys.b, [meta(7, T0, { Title: 'B seven', IDType: 'Campaign', Status: 2 }), b('sent', T0)]);
});
afterAll(async () => f?.close());

const blank = { ClickedCount: 0, DeliveredCount: 0, EditMode: '', EditType: 'unknown', OpenedCount: 0, ProcessedCount: 0, SendTimeStart: 0, Starred: false, Subject: '', Title: '' };
const C7 = { ...blank, ClickedCount: 1, DeliveredCount: 2, EditMode: 'html', EditType: 'full', ID: 7, IDType: 'Campaign', OpenedCount: 2, ProcessedCount: 3, SendTimeStart: T0 - 3600, Starred: true, Status: 2, Subject: 'Everything MUST go', Title: 'Spring sale' };
const C20 = { ...blank, EditMode: 'tool', EditType: 'full', ID: 20, IDType: 'NL', Status: 0, Subject: 'Hello world', Title: 'Draft newsletter' };
const C21 = { ...blank, ID: 21, IDType: 'AX', SendTimeStart: T0 + 86_400, Status: 1, Subject: 'AB test', Title: 'A/B' };
const C22 = { ...blank, ID: 22, IDType: 'Campaign', SendTimeStart: T0 - 86_400, Status: -1, Subject: 'old news', Title: 'Old' };
const C23 = { ...blank, ID: 23, IDType: 'NL', Status: -2, Subject: 'gone', Title: 'Gone' };
const CBIG = { ...blank, DeliveredCount: 1, ID: BigInt(BIG), IDType: 'Campaign', ProcessedCount: 2, SendTimeStart: T0 + 50, Status: 2 };

const ids = async (qs: string, key = f.keys.a) => {
  const res = await f.get(`/v3/REST/campaignoverview?${qs}`, key);
  expect(res.status, qs).toBe(200);
  return (res.body as { Data: { ID: number | bigint }[] }).Data.map((r) => String(r.ID));
};

describe('GET /v3/REST/campaignoverview', () => {
  it('lists counts and metadata, with or without either, by ID', async () => {
    const res = await f.get('/v3/REST/campaignoverview');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ Count: 6, Data: [C7, C20, C21, C22, C23, CBIG], Total: 6 });
    expect(res.text).toContain(`"ID":${BIG},`);
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys(C7).sort());
  });

  it('answers the item forms /{ID} and /{IDType}/{ID}', async () => {
    expect((await f.get('/v3/REST/campaignoverview/7')).body).toEqual({ Count: 1, Data: [C7], Total: 1 });
    expect((await f.get('/v3/REST/campaignoverview/Campaign/7')).body).toEqual({ Count: 1, Data: [C7], Total: 1 });
    expect((await f.get('/v3/REST/CampaignOverview/campaign/7')).body).toEqual({ Count: 1, Data: [C7], Total: 1 });
    expect((await f.get('/v3/REST/campaignoverview/NL/20')).body).toEqual({ Count: 1, Data: [C20], Total: 1 });
    const big = await f.get(`/v3/REST/campaignoverview/${BIG}`);
    expect(big.body).toEqual({ Count: 1, Data: [CBIG], Total: 1 });
    expect(big.text).toContain(`"ID":${BIG},`);
  });

  it('answers 404 for an unknown id, a wrong IDType and the other tenant’s id', async () => {
    for (const path of ['999', 'NL/7', 'AX/20', '9223372036854775808']) {
      expect(await f.get(`/v3/REST/campaignoverview/${path}`), path).toMatchObject({ status: 404, body: { ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 } });
    }
    expect((await f.get('/v3/REST/campaignoverview/20', f.keys.b)).status).toBe(404);
    const b7 = await f.get('/v3/REST/campaignoverview/7', f.keys.b);
    expect(b7.body).toEqual({ Count: 1, Data: [{ ...blank, DeliveredCount: 1, ID: 7, IDType: 'Campaign', ProcessedCount: 1, SendTimeStart: T0, Status: 2, Title: 'B seven' }], Total: 1 });
    expect(await ids('', f.keys.b)).toEqual(['7']);
  });

  it.each([
    ['All=true', ['7', '20', '21', '22', BIG]],
    ['All=false', ['23']],
    ['Drafts=1', ['20']],
    ['Programmed=true', ['21']],
    ['Sent=true', ['7', BIG]],
    ['Archived=true', ['22']],
    ['Sent=true&Drafts=true', ['7', '20', BIG]],
    ['Sent=false&All=true', ['20', '21', '22']],
    ['Starred=true', ['7']],
    ['Starred=false', ['20', '21', '22', '23', BIG]],
    ['IDType=NL', ['20', '23']],
    ['idtype=nl,AX', ['20', '21', '23']],
    ['IDType[]=AX&IDType[]=Campaign', ['7', '21', '22', BIG]],
    ['Subject=must', ['7']],
    ['Subject=o', ['7', '20', '22', '23']],
    ['ID=21', ['21']],
    [`ID=${BIG}`, [BIG]],
    ['ID=8', []],
    ['Drafts=true&Starred=true', []],
  ])('filters with %s', async (qs, expected) => {
    expect(await ids(qs)).toEqual(expected);
  });

  it.each([
    ['ID DESC', [BIG, '23', '22', '21', '20', '7']],
    ['id+desc', [BIG, '23', '22', '21', '20', '7']],
    ['ID', ['7', '20', '21', '22', '23', BIG]],
    ['SendTimeStart', ['20', '23', '22', '7', BIG, '21']],
    ['SendTimeStart DESC', ['21', BIG, '7', '22', '20', '23']],
    ['ProcessedCount DESC, ID DESC', ['7', BIG, '23', '22', '21', '20']],
    ['DeliveredCount, OpenedCount desc, ClickedCount', ['20', '21', '22', '23', BIG, '7']],
  ])('sorts by %s', async (sort, expected) => {
    expect(await ids(`Sort=${encodeURIComponent(sort)}`)).toEqual(expected);
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect((await f.get('/v3/REST/campaignoverview?Limit=2&Offset=1')).body).toEqual({ Count: 2, Data: [C20, C21], Total: 6 });
    expect((await f.get('/v3/REST/campaignoverview?Limit=0')).body).toMatchObject({ Count: 6, Total: 6 });
    expect((await f.get('/v3/REST/campaignoverview?Offset=6')).body).toEqual({ Count: 0, Data: [], Total: 6 });
    expect((await f.get('/v3/REST/campaignoverview?countOnly=1&All=true')).body).toEqual({ Count: 5, Data: [], Total: 5 });
  });

  it.each([
    ['All=maybe', /Invalid parameter All: must be true, false, 1 or 0/],
    ['Drafts=2', /Invalid parameter Drafts/],
    ['IDType=XY', /Invalid parameter IDType: must be one of AX, Campaign, NL/],
    ['ID=-1', /Invalid parameter ID: must be a non-negative whole number/],
    ['ID=9223372036854775808', /Invalid parameter ID: is beyond the signed 64-bit range/],
    ['Starred=yes', /Invalid parameter Starred/],
    ['Subject=%00', /Invalid parameter Subject/],
    ['Sort=Title', /Invalid parameter Sort: "Title" is not a sortable property of campaignoverview/],
    ['Limit=1001', /Invalid parameter Limit/],
    ['Offset=-1', /Invalid parameter Offset/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/campaignoverview?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });

  it('answers 400 naming the path part for a malformed item path', async () => {
    expect((await f.get('/v3/REST/campaignoverview/abc')).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter ID/), StatusCode: 400 });
    expect((await f.get('/v3/REST/campaignoverview/XY/7')).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter IDType/), StatusCode: 400 });
  });
});
