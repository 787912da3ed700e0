import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stableId } from '../../../projections/kit/ids.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000;
const at = (s: number) => new Date(s * 1000).toISOString().replace('.000Z', 'Z');
const BIGL = '9007199254740997'; // list id > 2^53

const msg = (id: string, email: string, contact: number, list: string | number) => (event: string, time: number, extra: Record<string, unknown> = {}) => ({
  event, time, MessageID: id, email, mj_contact_id: contact, mj_list_id: list, ...extra,
});

beforeAll(async () => {
  f = await openApiFixture();
  const [m1, m2] = [msg('1', 'ann@gmail.com', 11, 3), msg('2', 'ann@gmail.com', 11, 3)];
  const m3 = msg('3', 'bob@yahoo.com', 12, 3);
  const m4 = msg('4', 'ann@gmail.com', 11, BIGL);
  const m5 = msg('5', 'cid@example.org', 13, 4);
  await f.given(f.keys.a, [
    m1('sent', T0), m1('open', T0 + 60),
    m2('sent', T0 + 10), m2('unsub', T0 + 500),
    m3('bounce', T0 + 8, { hard_bounce: true, blocked: false, error_related_to: 'recipient', error: 'user unknown' }),
    m4('sent', T0 + 20), m4('click', T0 + 30, { url: 'https://x.example/' }),
    m5('queued', T0 + 1), m5('sent', T0 + 2), m5('unsub', T0 + 100),
    { event: 'sent', time: T0, MessageID: '6', email: 'dee@example.org' }, // no list: not a list recipient
  ]);
  await f.given(f.keys.b, [msg('1', 'ann@gmail.com', 11, 3)('sent', T0)]);
});
afterAll(async () => f?.close());

const idOf = (key: 'a' | 'b', list: string | number, email: string) => Number(stableId(`list-recipient:${f.keys[key].APIKeyID}:${list}:${email}`));
const zero = {
  BlockedCount: 0, BouncedCount: 0, ClickedCount: 0, DeferredCount: 0, DeliveredCount: 0, HardbouncedCount: 0, OpenedCount: 0, PreQueuedCount: 0,
  ProcessedCount: 0, QueuedCount: 0, SoftbouncedCount: 0, SpamComplaintCount: 0, UnsubscribedCount: 0, WorkFlowExitedCount: 0,
};
const ARGS = { ann3: [3, 'ann@gmail.com'], bob3: [3, 'bob@yahoo.com'], annBig: [BIGL, 'ann@gmail.com'], cid4: [4, 'cid@example.org'] } as const;
type Name = keyof typeof ARGS;
const idOfName = (name: string) => idOf('a', ARGS[name as Name][0], ARGS[name as Name][1]);
/** Names in ListRecipientID order (the default order). */
const byId = (names: string[]) => [...names].sort((x, y) => idOfName(x) - idOfName(y));

let R: Record<Name, Record<string, unknown>>;
let NAME: Map<number, string>;
beforeAll(() => {
  R = {
    ann3: { ...zero, DeliveredCount: 2, LastActivityAt: at(T0 + 500), ListRecipientID: idOf('a', 3, 'ann@gmail.com'), OpenedCount: 1, ProcessedCount: 2, UnsubscribedCount: 1 },
    bob3: { ...zero, BouncedCount: 1, HardbouncedCount: 1, LastActivityAt: at(T0 + 8), ListRecipientID: idOf('a', 3, 'bob@yahoo.com'), ProcessedCount: 1 },
    annBig: { ...zero, ClickedCount: 1, DeliveredCount: 1, LastActivityAt: at(T0 + 30), ListRecipientID: idOf('a', BIGL, 'ann@gmail.com'), ProcessedCount: 1 },
    cid4: { ...zero, DeliveredCount: 1, LastActivityAt: at(T0 + 100), ListRecipientID: idOf('a', 4, 'cid@example.org'), ProcessedCount: 1, QueuedCount: 1, UnsubscribedCount: 1 },
  };
  NAME = new Map(Object.entries(R).map(([name, r]) => [r['ListRecipientID'] as number, name]));
});

const who = async (qs: string) => {
  const res = await f.get(`/v3/REST/listrecipientstatistics?${qs}`);
  expect(res.status, qs).toBe(200);
  return (res.body as { Data: { ListRecipientID: number }[] }).Data.map((r) => NAME.get(r.ListRecipientID));
};

describe('GET /v3/REST/listrecipientstatistics', () => {
  it('lists counts per list recipient, by ListRecipientID, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/listrecipientstatistics');
    expect(res.status).toBe(200);
    const all = byId(['ann3', 'bob3', 'annBig', 'cid4']).map((n) => R[n as Name]);
    expect(res.body).toEqual({ Count: 4, Data: all, Total: 4 });
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys(R.ann3).sort());
  });

  it('adds Data (empty: no contact extra data) only with ShowExtraData', async () => {
    const res = await f.get(`/v3/REST/listrecipientstatistics?ShowExtraData=1&ContactsList=4`);
    expect(res.body).toEqual({ Count: 1, Data: [{ ...R.cid4, Data: [] }], Total: 1 });
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys({ ...R.cid4, Data: [] }).sort());
    expect((await f.get(`/v3/REST/listrecipientstatistics?ShowExtraData=false&ContactsList=4`)).body).toEqual({ Count: 1, Data: [R.cid4], Total: 1 });
  });

  it('answers the item form /{ListRecipientID}, and 404 for an unknown or another tenant’s id', async () => {
    const id = idOf('a', 3, 'ann@gmail.com');
    expect((await f.get(`/v3/REST/listrecipientstatistics/${id}`)).body).toEqual({ Count: 1, Data: [R.ann3], Total: 1 });
    expect((await f.get(`/v3/REST/listrecipientstatistics/${id}?ShowExtraData=true`)).body).toEqual({ Count: 1, Data: [{ ...R.ann3, Data: [] }], Total: 1 });
    expect(await f.get('/v3/REST/listrecipientstatistics/999')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect((await f.get(`/v3/REST/listrecipientstatistics/${id}`, f.keys.b)).status).toBe(404);
    const bId = idOf('b', 3, 'ann@gmail.com');
    expect((await f.get(`/v3/REST/listrecipientstatistics/${bId}`)).status).toBe(404);
    expect((await f.get(`/v3/REST/listrecipientstatistics/${bId}`, f.keys.b)).body).toEqual({ Count: 1, Data: [{ ...zero, DeliveredCount: 1, LastActivityAt: at(T0), ListRecipientID: bId, ProcessedCount: 1 }], Total: 1 });
    expect((await f.get('/v3/REST/listrecipientstatistics/abc')).body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/^Invalid parameter ListRecipientID/), StatusCode: 400 });
  });

  it.each([
    ['Contact=11', ['ann3', 'annBig']],
    ['ContactID=12', ['bob3']],
    ['ContactsList=3', ['ann3', 'bob3']],
    [`ContactsList=${BIGL}`, ['annBig']],
    ['ContactsList=9007199254740996', []],
    ['ContactsListID=4', ['cid4']],
    ['IsUnsubscribed=true', ['ann3', 'cid4']],
    ['IsUnsubscribed=false', ['bob3', 'annBig']],
    ['IsActive=true', ['bob3', 'annBig']],
    ['IsActive=0', ['ann3', 'cid4']],
    ['IsExcludedFromCampaigns=true', []],
    ['IsExcludedFromCampaigns=false', ['ann3', 'bob3', 'annBig', 'cid4']],
    [`MinUnsubscribedAt=${T0 + 100}`, ['ann3', 'cid4']],
    [`MinUnsubscribedAt=${T0 + 101}`, ['ann3']],
    [`MaxUnsubscribedAt=${at(T0 + 500)}`, ['cid4']],
    ['Blocked=true', []],
    ['Bounced=true', ['bob3']],
    ['HardBounced=true', ['bob3']],
    ['SoftBounced=true', []],
    ['Click=true', ['annBig']],
    ['Deferred=false', ['ann3', 'bob3', 'annBig', 'cid4']],
    ['Open=true', ['ann3']],
    ['Queued=true', ['cid4']],
    ['Sent=false', ['bob3']],
    ['Spam=true', []],
    ['Unsubscribed=true&ContactsList=3', ['ann3']],
    [`LastActivityAt=${T0 + 100}`, ['cid4']],
    [`MinLastActivityAt=${T0 + 29}&MaxLastActivityAt=${T0 + 500}`, ['annBig', 'cid4']],
    // Greater than: annBig's last activity is T0 + 30 exactly.
    [`MinLastActivityAt=${T0 + 30}&MaxLastActivityAt=${T0 + 500}`, ['cid4']],
  ])('filters with %s', async (qs, expected) => {
    expect(await who(qs)).toEqual(byId(expected));
  });

  it('sorts by ID, ProcessedCount, Email, LastActivityAt and the counts, both directions', async () => {
    const ids = byId(['ann3', 'bob3', 'annBig', 'cid4']);
    expect(await who('Sort=ID')).toEqual(ids);
    expect(await who('Sort=ID%20DESC')).toEqual([...ids].reverse());
    expect(await who('Sort=ProcessedCount+DESC')).toEqual(['ann3', ...byId(['bob3', 'annBig', 'cid4'])]);
    expect(await who('Sort=ProcessedCount')).toEqual([...byId(['bob3', 'annBig', 'cid4']), 'ann3']);
    expect(await who('Sort=Email')).toEqual([...byId(['ann3', 'annBig']), 'bob3', 'cid4']);
    expect(await who('Sort=email%20desc')).toEqual(['cid4', 'bob3', ...byId(['ann3', 'annBig'])]);
    expect(await who('Sort=LastActivityAt DESC')).toEqual(['ann3', 'cid4', 'annBig', 'bob3']);
    expect(await who('Sort=UnsubscribedCount DESC, Email DESC')).toEqual(['cid4', 'ann3', 'bob3', 'annBig']);
    // Counts not tracked (always 0): every row ties, the next term or the tie-break orders them.
    expect(await who('Sort=PreQueuedCount')).toEqual(ids);
    expect(await who('Sort=WorkFlowExitedCount DESC, Email DESC')).toEqual(['cid4', 'bob3', ...byId(['ann3', 'annBig'])]);
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    const ids = byId(['ann3', 'bob3', 'annBig', 'cid4']);
    const page = await f.get('/v3/REST/listrecipientstatistics?Limit=2&Offset=2');
    expect(page.body).toEqual({ Count: 2, Data: ids.slice(2).map((n) => R[n as Name]), Total: 4 });
    expect((await f.get('/v3/REST/listrecipientstatistics?countOnly=1&ContactsList=3')).body).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it.each([
    ['Contact=abc', /Invalid parameter Contact: must be a non-negative whole number/],
    ['ContactsList=9223372036854775808', /Invalid parameter ContactsList: is beyond the signed 64-bit range/],
    ['IsActive=yes', /Invalid parameter IsActive/],
    ['IsUnsubscribed=2', /Invalid parameter IsUnsubscribed/],
    ['IsExcludedFromCampaigns=no', /Invalid parameter IsExcludedFromCampaigns/],
    ['ShowExtraData=please', /Invalid parameter ShowExtraData/],
    ['MinUnsubscribedAt=tomorrow', /Invalid parameter MinUnsubscribedAt/],
    ['MaxUnsubscribedAt=2024-13-01', /Invalid parameter MaxUnsubscribedAt/],
    ['Open=maybe', /Invalid parameter Open/],
    ['MinLastActivityAt=x', /Invalid parameter MinLastActivityAt/],
    ['Sort=ContactID', /Invalid parameter Sort: "ContactID" is not a sortable property of listrecipientstatistics/],
    ['Limit=abc', /Invalid parameter Limit/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/listrecipientstatistics?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});
