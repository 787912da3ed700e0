import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000;
const BIG = '9007199254740993';

let n = 0;
/** One message to `email` in `campaign`: its events by type, a second apart. */
function message(email: string, types: string[], campaign: string | number = 7): Record<string, unknown>[] {
  const id = String(++n);
  return types.map((type, i) => {
    const extra: Record<string, unknown> =
      type === 'click' ? { url: 'https://x.example/' } :
      type === 'hardbounce' || type === 'softbounce' ? { hard_bounce: type === 'hardbounce', blocked: false, error_related_to: 'recipient', error: 'user unknown' } :
      type === 'blocked' ? { error_related_to: 'recipient', error: 'user unknown' } :
      type === 'spam' ? { source: 'JMRPP' } : {};
    const event = type.endsWith('bounce') ? 'bounce' : type;
    return { event, time: T0 + i, MessageID: id, email, mj_campaign_id: campaign, ...extra };
  });
}

beforeAll(async () => {
  f = await openApiFixture();
  await f.given(f.keys.a, [
    ...message('ann@gmail.com', ['sent', 'open', 'click']),
    ...message('bo@gmail.com', ['sent', 'open']),
    ...message('cy@googlemail.com', ['deferred', 'sent']),
    ...message('dd@gmail.com', ['softbounce']),
    ...message('ee@gmail.com', ['blocked']),
    ...message('ff@gmail.com', ['sent', 'unsub', 'spam']),
    ...message('u1@yahoo.com', ['sent', 'open', 'click']),
    ...message('u2@yahoo.fr', ['sent', 'open', 'click']),
    ...message('u3@ymail.com', ['sent', 'open']),
    ...message('h1@hotmail.com', ['hardbounce']),
    ...message('x@example.org', ['sent']),
    ...message('y@example.net', ['queued', 'sent']),
    ...message('z@gmail.com', ['sent'], BIG),
    // Campaign 8: opens and an unsubscribe with no delivery event (yet), a click with no open.
    ...message('p1@gmail.com', ['sent', 'open', 'click'], 8),
    ...message('p2@gmail.com', ['open'], 8),
    ...message('p3@gmail.com', ['sent', 'click'], 8),
    ...message('p4@gmail.com', ['unsub'], 8),
    ...message('p5@gmail.com', ['open'], 8),
  ]);
  await f.given(f.keys.b, message('b@gmail.com', ['sent', 'open']));
});
afterAll(async () => f?.close());

const row = (name: string, c: Partial<Record<'att' | 'del' | 'open' | 'click' | 'def' | 'soft' | 'hard' | 'unsub' | 'spam', number>>, rates: Partial<Record<string, number>> = {}) => ({
  ESPName: name,
  DeliveredMessagesCount: c.del ?? 0,
  AttemptedMessagesCount: c.att ?? 0,
  OpenedMessagesCount: c.open ?? 0,
  ClickedMessagesCount: c.click ?? 0,
  DeferredMessagesCount: c.def ?? 0,
  SoftBouncedMessagesCount: c.soft ?? 0,
  HardBouncedMessagesCount: c.hard ?? 0,
  UnsubscribedMessagesCount: c.unsub ?? 0,
  SpamReportsCount: c.spam ?? 0,
  OpenRate: 0, ClickThroughRate: 0, SoftBouncedRate: 0, HardBouncedRate: 0, UnsubscribedRate: 0, SpamReportsRate: 0, DeferredRate: 0,
  ...rates,
});
const GMAIL = row('Gmail', { att: 5, del: 4, open: 2, click: 1, def: 1, soft: 1, unsub: 1, spam: 1 }, { OpenRate: 0.4, ClickThroughRate: 0.5, SoftBouncedRate: 0.2, UnsubscribedRate: 0.25, SpamReportsRate: 0.25, DeferredRate: 0.2 });
const YAHOO = row('Yahoo', { att: 3, del: 3, open: 3, click: 2 }, { OpenRate: 1, ClickThroughRate: 0.6667 });
const OTHERS = row('others', { att: 2, del: 2 });
const OUTLOOK = row('Outlook', { att: 1, hard: 1 }, { HardBouncedRate: 1 });
const body = <T>(rows: T[], total = rows.length) => ({ Count: rows.length, Data: rows, Total: total });

describe('GET /v3/REST/statistics/recipient-esp', () => {
  it('gives counts and rates per ESP of the campaign, in the order of Mailjet’s sample', async () => {
    const res = await f.get('/v3/REST/statistics/recipient-esp?CampaignID=7&Sort=AttemptedMessagesCount+DESC');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body([GMAIL, YAHOO, OTHERS, OUTLOOK]));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys(GMAIL));
    expect(res.text).toContain('"ClickThroughRate":0.6667,');
  });

  it('gives each rate as the share of its denominator’s messages, never above 1', async () => {
    // 3 opened of 2 attempted: the opens with no delivery event count as opened, not in the open
    // rate (1 of the 2 attempted opened); 1 of the 3 opened clicked (the other click had no open);
    // the unsubscribe came with no delivery.
    const res = await f.get('/v3/REST/statistics/recipient-esp?CampaignID=8');
    expect(res.body).toEqual(body([row('Gmail', { att: 2, del: 2, open: 3, click: 2, unsub: 1 }, { OpenRate: 0.5, ClickThroughRate: 0.3333 })]));
  });

  it('filters by EspNames / ESP_Name, one name or a list, without regard to case', async () => {
    const get = async (qs: string) => (await f.get(`/v3/REST/statistics/recipient-esp?CampaignID=7&Sort=AttemptedMessagesCount+DESC&${qs}`)).body;
    expect(await get('EspNames=Gmail')).toEqual(body([GMAIL]));
    expect(await get('ESP_Name=yahoo,OTHERS')).toEqual(body([YAHOO, OTHERS]));
    expect(await get('EspNames[]=Outlook&EspNames[]=Gmail')).toEqual(body([GMAIL, OUTLOOK]));
    expect(await get('espnames=Apple')).toEqual(body([]));
  });

  it('reads a 64-bit campaign id exactly and keeps tenants apart', async () => {
    expect((await f.get(`/v3/REST/statistics/recipient-esp?CampaignId=${BIG}`)).body).toEqual(body([row('Gmail', { att: 1, del: 1 })]));
    expect((await f.get('/v3/REST/statistics/recipient-esp?CampaignID=9007199254740992')).body).toEqual(body([]));
    expect((await f.get('/v3/REST/statistics/recipient-esp?CampaignID=7', f.keys.b)).body).toEqual(body([row('Gmail', { att: 1, del: 1, open: 1 }, { OpenRate: 1 })]));
    expect((await f.get(`/v3/REST/statistics/recipient-esp?CampaignID=${BIG}`, f.keys.b)).body).toEqual(body([]));
  });

  it('sorts by ESPName and the counts, pages and counts', async () => {
    const names = async (qs: string) => ((await f.get(`/v3/REST/statistics/recipient-esp?CampaignID=7&${qs}`)).body as { Data: { ESPName: string }[] }).Data.map((r) => r.ESPName);
    expect(await names('Sort=AttemptedMessagesCount')).toEqual(['Outlook', 'others', 'Yahoo', 'Gmail']);
    expect(await names('Sort=OpenedMessagesCount DESC, DeliveredMessagesCount DESC')).toEqual(['Yahoo', 'Gmail', 'others', 'Outlook']);
    expect(await names('Sort=ESPName&EspNames=Gmail,Yahoo')).toEqual(['Gmail', 'Yahoo']);
    expect(await names('Sort=ESPName DESC&EspNames=Gmail,Yahoo')).toEqual(['Yahoo', 'Gmail']);
    expect((await f.get('/v3/REST/statistics/recipient-esp?CampaignID=7&Sort=AttemptedMessagesCount+DESC&Limit=2&Offset=1')).body).toEqual(body([YAHOO, OTHERS], 4));
    expect((await f.get('/v3/REST/statistics/recipient-esp?CampaignID=7&countOnly=true')).body).toEqual({ Count: 4, Data: [], Total: 4 });
  });

  it.each([
    ['', /Missing parameter CampaignID/],
    ['EspNames=Gmail', /Missing parameter CampaignID/],
    ['CampaignID=x', /Invalid parameter CampaignID/],
    ['CampaignID=-7', /Invalid parameter CampaignID/],
    ['CampaignID=7&EspNames=%00', /Invalid parameter EspNames/],
    [`CampaignID=7&EspNames=${'a'.repeat(101)}`, /Invalid parameter EspNames/],
    ['CampaignID=7&Sort=OpenRates', /Invalid parameter Sort: "OpenRates" is not a sortable property of statistics\/recipient-esp/],
    ['CampaignID=7&countOnly=maybe', /Invalid parameter countOnly/],
  ])('answers 400 naming the parameter for "%s"', async (qs, message) => {
    const res = await f.get(`/v3/REST/statistics/recipient-esp?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
