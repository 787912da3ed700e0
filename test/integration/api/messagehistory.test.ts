import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { UA_CHROME, UA_ID, UA_MAIL } from '../../unit/projections/scenarios/common.js';
import { BIG, D10, T0, loadMessageEvents } from './message-events-data.js';

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await loadMessageEvents(f);
});
afterAll(async () => f?.close());

const CHROME = Number(UA_ID.chrome);
const MAIL = Number(UA_ID.mail);
const ev = (EventType: string, EventAt: number, more: Partial<Record<'Comment' | 'State' | 'Useragent', string>> & { UseragentID?: number } = {}) => ({
  Comment: '',
  EventAt,
  EventType,
  State: '',
  Useragent: '',
  UseragentID: 0,
  ...more,
});

// Message BIG, oldest first: queued, a greylisting soft bounce, sent, opens and clicks.
const BIG_HISTORY = [
  ev('queued', T0 - 2),
  ev('bounced', T0 - 1, { Comment: 'greylisted, try later', State: 'greylisted' }),
  ev('sent', T0, { Comment: 'sent (250 2.0.0 OK)' }),
  ev('opened', T0 + 60, { Useragent: UA_CHROME, UseragentID: CHROME }),
  ev('clicked', T0 + 120, { Useragent: UA_CHROME, UseragentID: CHROME }),
  ev('clicked', T0 + 200, { Useragent: UA_MAIL, UseragentID: MAIL }),
  ev('opened', T0 + 90_000, { Useragent: UA_MAIL, UseragentID: MAIL }),
];
const envelope = (data: Record<string, unknown>[]) => ({ Count: data.length, Data: data, Total: data.length });

describe('GET /v3/REST/messagehistory/{MessageID}', () => {
  it("answers a 64-bit message's events, oldest first, in Mailjet field order", async () => {
    const res = await f.get(`/v3/REST/messagehistory/${BIG}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(envelope(BIG_HISTORY));
    expect(Object.keys((res.body as { Data: object[] }).Data[0] ?? {})).toEqual(['Comment', 'EventAt', 'EventType', 'State', 'Useragent', 'UseragentID']);
  });

  it('names the pipeline events queued and deferred, and gives each failure its state text', async () => {
    expect((await f.get('/v3/REST/messagehistory/5')).body).toEqual(
      envelope([
        ev('queued', D10 + 1),
        ev('deferred', D10 + 2, { Comment: '451 4.7.1 try later', State: 'greylisted' }),
        ev('bounced', D10 + 100, { State: 'connection issue' }),
      ]),
    );
    expect((await f.get('/v3/REST/messagehistory/4')).body).toEqual(envelope([ev('blocked', T0 + 5, { State: 'preblocked' })]));
    expect((await f.get('/v3/REST/messagehistory/2')).body).toEqual(
      envelope([ev('sent', T0 + 10), ev('bounced', T0 + 15, { State: 'quota exceeded' }), ev('bounced', T0 + 20, { Comment: 'Host or domain name not found', State: 'user unknown' })]),
    );
  });

  it('shows spam and unsub events, the unsub with its user agent', async () => {
    const body = (await f.get('/v3/REST/messagehistory/3')).body as { Data: Record<string, unknown>[] };
    expect(body.Data.slice(0, 4)).toEqual([
      ev('sent', D10),
      ev('opened', D10 + 30, { Useragent: UA_MAIL, UseragentID: MAIL }),
      ev('clicked', D10 + 40, { Useragent: UA_MAIL, UseragentID: MAIL }),
      ev('spam', D10 + 300),
    ]);
    expect(body.Data[4]).toEqual({ ...ev('unsub', D10 + 400, { Useragent: 'List-Unsubscribe' }), UseragentID: expect.any(Number) });
    expect(body.Data[4]?.['UseragentID']).toBeGreaterThan(0);
  });

  it('keeps tenants apart, and orders events of the same second by pipeline stage', async () => {
    expect((await f.get('/v3/REST/messagehistory/2', f.keys.b)).body).toEqual(
      envelope([
        ev('sent', T0),
        ev('bounced', T0 + 30, { State: 'user unknown' }),
        ev('opened', T0 + 40, { Useragent: UA_CHROME, UseragentID: CHROME }),
        ev('opened', T0 + 50, { Useragent: UA_MAIL, UseragentID: MAIL }),
        ev('clicked', T0 + 50, { Useragent: UA_CHROME, UseragentID: CHROME }),
      ]),
    );
    expect(await f.get('/v3/REST/messagehistory/3', f.keys.b)).toMatchObject({ status: 404, body: { ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect(await f.get('/v3/REST/messagehistory/6')).toMatchObject({ status: 404 });
  });

  it('answers 404 for an unknown message and 400 naming ID for a malformed one', async () => {
    expect(await f.get('/v3/REST/messagehistory/999')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/messagehistory/0')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/messagehistory/abc')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/^Invalid parameter ID:/) } });
  });
});

describe('GET /v3/REST/messagehistory?Message=', () => {
  const list = async (qs: string, key = f.keys.a) => {
    const res = await f.get(`/v3/REST/messagehistory?${qs}`, key);
    expect(res.status, qs).toBe(200);
    return res.body;
  };

  it('lists the same events, paged, counted and sorted by EventAt both ways', async () => {
    expect(await list(`Message=${BIG}`)).toEqual(envelope(BIG_HISTORY));
    expect(await list('MessageID=4')).toEqual(envelope([ev('blocked', T0 + 5, { State: 'preblocked' })]));
    expect(await list(`message=${BIG}&Limit=2&Offset=1`)).toEqual({ Count: 2, Data: BIG_HISTORY.slice(1, 3), Total: 7 });
    expect(await list(`Message=${BIG}&countOnly=1`)).toEqual({ Count: 7, Data: [], Total: 7 });
    expect(await list(`Message=${BIG}&Sort=EventAt DESC`)).toEqual(envelope([...BIG_HISTORY].reverse()));
    expect(await list(`Message=${BIG}&Sort=eventat`)).toEqual(envelope(BIG_HISTORY));
  });

  it("is empty for an unknown message or another tenant's", async () => {
    expect(await list('Message=999')).toEqual({ Count: 0, Data: [], Total: 0 });
    expect(await list('Message=3', f.keys.b)).toEqual({ Count: 0, Data: [], Total: 0 });
  });

  it.each([
    ['', /Missing parameter Message/],
    ['Limit=5', /Missing parameter Message/],
    ['Message=abc', /Message: must be a non-negative whole number/],
    ['Message=18446744073709551616', /Message: is beyond the 64-bit range/],
    [`Message=${BIG}&Sort=EventType`, /Sort: "EventType" is not a sortable property of messagehistory; sort by EventAt/],
    [`Message=${BIG}&Limit=1001`, /Limit/],
    [`Message=${BIG}&Offset=x`, /Offset/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/messagehistory?${qs}`);
    expect(res.status, qs).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
