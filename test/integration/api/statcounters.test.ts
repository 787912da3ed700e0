import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000; // 2023-11-14T22:13:20Z
const DAY0 = 1_699_920_000; // 2023-11-14T00:00:00Z

beforeAll(async () => {
  f = await openApiFixture();
  await f.given(f.keys.a, [
    { event: 'sent', time: T0, MessageID: '19421777835146490', email: 'a@gmail.com', mj_campaign_id: 7, mj_list_id: 3, mj_sender_id: 9 },
    { event: 'open', time: T0 + 60, MessageID: '19421777835146490', email: 'a@gmail.com', mj_campaign_id: 7, agent: 'Mozilla/5.0', ip: '1.2.3.4', geo: 'FR' },
    { event: 'open', time: T0 + 90_000, MessageID: '19421777835146490', email: 'a@gmail.com', mj_campaign_id: 7, agent: 'Mozilla/5.0', ip: '1.2.3.4', geo: 'FR' },
    { event: 'bounce', time: T0 + 10, MessageID: '2', email: 'b@yahoo.com', mj_campaign_id: 7, hard_bounce: true, blocked: false, error_related_to: 'recipient', error: 'user unknown' },
  ]);
  await f.given(f.keys.b, [{ event: 'sent', time: T0, MessageID: '3', email: 'c@gmail.com', mj_campaign_id: 7 }]);
});
afterAll(async () => f?.close());

const zeros = {
  EventClickDelay: 0, EventClickedCount: 0, EventOpenDelay: 0, EventOpenedCount: 0, EventSpamCount: 0, EventUnsubscribedCount: 0, EventWorkflowExitedCount: 0,
  MessageBlockedCount: 0, MessageClickedCount: 0, MessageDeferredCount: 0, MessageHardBouncedCount: 0, MessageOpenedCount: 0, MessageQueuedCount: 0,
  MessageSentCount: 0, MessageSoftBouncedCount: 0, MessageSpamCount: 0, MessageUnsubscribedCount: 0, MessageWorkFlowExitedCount: 0,
};

describe('GET /v3/REST/statcounters', () => {
  it('answers APIKey Lifetime with every counter, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      Count: 1,
      Data: [{ ...zeros, APIKeyID: Number(f.keys.a.APIKeyID), EventOpenDelay: 60, EventOpenedCount: 2, MessageHardBouncedCount: 1, MessageOpenedCount: 1, MessageSentCount: 1, SourceID: 0, Timeslice: '', Total: 2 }],
      Total: 1,
    });
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys((res.body as { Data: object[] }).Data[0] as object).sort());
  });

  it('slices Event timing per day, oldest first, within [FromTS, ToTS)', async () => {
    const res = await f.get(`/v3/rest/StatCounters?countersource=Campaign&sourceid=7&countertiming=Event&counterresolution=Day&FromTS=${DAY0}&ToTS=2023-11-17T00:00:00Z`);
    expect(res.status).toBe(200);
    const body = res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
    expect(body.Data.map((r) => [r['Timeslice'], r['Total'], r['EventOpenedCount'], r['MessageOpenedCount']])).toEqual([
      ['2023-11-14T00:00:00Z', 2, 1, 1],
      ['2023-11-15T00:00:00Z', 0, 1, 0],
    ]);
    expect(body.Total).toBe(2);
  });

  it('lists the slices that start in [FromTS, ToTS), not one that began before FromTS', async () => {
    const days = async (from: string, to = '2023-11-17T00:00:00Z') => {
      const res = await f.get(`/v3/REST/statcounters?CounterSource=Campaign&SourceID=7&CounterTiming=Event&CounterResolution=Day&FromTS=${from}&ToTS=${to}`);
      expect(res.status).toBe(200);
      return (res.body as { Data: Record<string, unknown>[] }).Data.map((r) => r['Timeslice']);
    };
    // The 14th's slice holds T0's events, before 23:50: not listed from 23:50 on.
    expect(await days('2023-11-14T23:50:00Z')).toEqual(['2023-11-15T00:00:00Z']);
    expect(await days('2023-11-14T00:00:00Z')).toEqual(['2023-11-14T00:00:00Z', '2023-11-15T00:00:00Z']);
    // ToTS bounds the starts: the 15th's slice starts before 2023-11-15T00:00:01Z.
    expect(await days('2023-11-14T00:00:00Z', '2023-11-15T00:00:01Z')).toEqual(['2023-11-14T00:00:00Z', '2023-11-15T00:00:00Z']);
    expect(await days('2023-11-14T00:00:00Z', '2023-11-15T00:00:00Z')).toEqual(['2023-11-14T00:00:00Z']);
  });

  it('sorts by time or a counter, in every spelling of the direction', async () => {
    for (const sort of ['Timeslice DESC', 'Timeslice+DESC', 'timeslice desc', 'Total', 'total ASC', 'MessageOpenedCount, Timeslice DESC']) {
      const res = await f.get(`/v3/REST/statcounters?CounterSource=Campaign&SourceID=7&CounterTiming=Event&CounterResolution=Day&FromTS=${DAY0}&Sort=${encodeURIComponent(sort)}`);
      expect(res.status, sort).toBe(200);
      expect((res.body as { Data: { Timeslice: string }[] }).Data[0]?.Timeslice, sort).toBe('2023-11-15T00:00:00Z');
    }
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    const base = `/v3/REST/statcounters?CounterSource=Campaign&SourceID=7&CounterTiming=Event&CounterResolution=Hour&FromTS=${DAY0}`;
    const page = await f.get(`${base}&Limit=1&Offset=1`);
    expect(page.body).toMatchObject({ Count: 1, Total: 2, Data: [{ Timeslice: '2023-11-15T23:00:00Z' }] });
    const count = await f.get(`${base}&countOnly=1`);
    expect(count.body).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it('keeps tenants apart', async () => {
    const res = await f.get('/v3/REST/statcounters?CounterSource=Campaign&SourceID=7&CounterTiming=Message&CounterResolution=Lifetime', f.keys.b);
    expect((res.body as { Data: { Total: number; APIKeyID: number }[] }).Data).toEqual([expect.objectContaining({ Total: 1, APIKeyID: Number(f.keys.b.APIKeyID) })]);
    const other = await f.get(`/v3/REST/statcounters?CounterSource=APIKey&SourceID=${f.keys.a.APIKeyID}&CounterTiming=Message&CounterResolution=Lifetime`, f.keys.b);
    expect(other.body).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it.each([
    ['', /CounterSource, CounterTiming, CounterResolution/],
    ['CounterSource=Campaign&CounterTiming=Message&CounterResolution=Lifetime', /SourceID/],
    ['CounterSource=List&SourceID=3&CounterTiming=Event&CounterResolution=Lifetime', /List is only available/],
    ['CounterSource=Sender&SourceID=9&CounterTiming=Event&CounterResolution=Day&FromTS=1', /Sender is only available/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Day', /FromTS/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&FromTS=1', /Lifetime/],
    ['CounterSource=Nope&CounterTiming=Message&CounterResolution=Lifetime', /CounterSource: must be one of/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Day&FromTS=yesterday', /FromTS/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&Limit=1001', /Limit: must be at most 1000/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&Sort=Email', /Sort: "Email" is not a sortable property/],
    ['CounterSource=Campaign&SourceID=-1&CounterTiming=Message&CounterResolution=Lifetime', /SourceID/],
    ['CounterSource=Campaign&CounterTiming=Message&CounterResolution=Lifetime&APIKeyID=7', /APIKeyID stands for CounterSource=APIKey&SourceID=7; it cannot be used with CounterSource=Campaign/],
    ['CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime&CampaignID=7', /CampaignID stands for CounterSource=Campaign/],
    ['CounterType=AML&CampaignID=7', /CampaignID stands for CounterSource=Campaign/],
    ['CampaignID=7&APIKeyID=1&CounterTiming=Message&CounterResolution=Lifetime', /APIKeyID stands for CounterSource=APIKey/],
    ['CounterType=CML&CounterSource=APIKey&SourceID=7', /CounterType=CML stands for CounterSource=Campaign; it cannot be used with CounterSource=APIKey/],
    ['CounterType=CML&CounterResolution=Day&SourceID=7&FromTS=1', /CounterType=CML stands for CounterResolution=Lifetime; it cannot be used with CounterResolution=Day/],
    ['CounterType=CML&SourceID=8&CampaignID=7', /CampaignID stands for CounterSource=Campaign&SourceID=7; it cannot be used with SourceID=8/],
    ['CounterType=CML&SourceIDs=1&SourceID=2', /SourceID=2 and SourceIDs=1 name different sources/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/statcounters?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });

  it('accepts CounterType and the CampaignID shortcut', async () => {
    const res = await f.get('/v3/REST/statcounters?CounterType=CML&CampaignID=7');
    expect((res.body as { Data: { Total: number }[] }).Data).toEqual([expect.objectContaining({ Total: 2, SourceID: 7 })]);
    // Saying the same thing twice is no conflict.
    const same = await f.get('/v3/REST/statcounters?CounterType=cml&CounterSource=Campaign&SourceID=7&CampaignID=7');
    expect((same.body as { Data: { Total: number }[] }).Data).toEqual([expect.objectContaining({ Total: 2, SourceID: 7 })]);
  });

  it('answers 401, 405 and 404 in the error envelope', async () => {
    expect((await f.get('/v3/REST/statcounters', null)).status).toBe(401);
    const post = await f.request('POST', '/v3/REST/statcounters', { body: {} });
    expect(post).toMatchObject({ status: 405, body: { StatusCode: 405 } });
    expect(post.headers['allow']).toBe('GET, HEAD');
    // Whatever the body: the method is refused before any body is read.
    for (const [type, body] of [['text/plain', 'hello'], ['application/json', '{not json']] as const) {
      expect(await f.request('POST', '/v3/REST/statcounters', { body, headers: { 'content-type': type } })).toMatchObject({ status: 405, body: { StatusCode: 405 } });
    }
    expect((await f.request('DELETE', '/v3/REST/statcounters', { key: null })).status).toBe(401);
    expect(await f.get('/v3/REST/nosuchthing')).toMatchObject({ status: 404, body: { StatusCode: 404 } });
  });
});
