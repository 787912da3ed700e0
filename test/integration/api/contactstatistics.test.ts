import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
const T0 = 1_700_000_000; // 2023-11-14T22:13:20Z
const at = (s: number) => new Date(s * 1000).toISOString().replace('.000Z', 'Z');
const BIGC = '9007199254740995'; // > 2^53: a double would read it as …996

const msg = (id: string, email: string, contact?: string | number) => (event: string, time: number, extra: Record<string, unknown> = {}) => ({
  event, time, MessageID: id, email, ...(contact !== undefined ? { mj_contact_id: contact } : {}), ...extra,
});
const failure = { error_related_to: 'recipient', error: 'user unknown' };

beforeAll(async () => {
  f = await openApiFixture();
  const [m1, m2] = [msg('1', 'ann@gmail.com', BIGC), msg('2', 'ann@gmail.com', BIGC)];
  const [m3, m4] = [msg('3', 'bob@yahoo.com', 5), msg('4', 'bob@yahoo.com', 5)];
  const [m5, m6] = [msg('5', 'cid@example.org', 6), msg('6', 'cid@example.org', 6)];
  const m7 = msg('7', 'Dee@Example.org');
  await f.given(f.keys.a, [
    m1('queued', T0 - 2), m1('sent', T0), m1('open', T0 + 60), m1('click', T0 + 90, { url: 'https://x.example/' }),
    m2('sent', T0 + 10, { mj_list_id: 3 }), m2('unsub', T0 + 500, { mj_list_id: 3 }),
    m3('bounce', T0 + 8, { ...failure, hard_bounce: true, blocked: false }),
    m4('deferred', T0 + 20, { error_related_to: 'domain', error: 'greylisted' }), m4('bounce', T0 + 30, { ...failure, hard_bounce: false, blocked: false }),
    m5('blocked', T0 + 40, failure),
    m6('sent', T0 + 50), m6('spam', T0 + 900, { source: 'JMRPP' }),
    m7('sent', T0 + 60),
  ]);
  await f.given(f.keys.b, [msg('1', 'ann@gmail.com', 5)('sent', T0)]);
});
afterAll(async () => f?.close());

const zero = {
  BlockedCount: 0, BouncedCount: 0, ClickedCount: 0, DeferredCount: 0, DeliveredCount: 0, HardbouncedCount: 0, MarketingContacts: 0, OpenedCount: 0,
  ProcessedCount: 0, QueuedCount: 0, SoftbouncedCount: 0, SpamComplaintCount: 0, UnsubscribedCount: 0, UserMarketingContacts: 0, WorkFlowExitedCount: 0,
};
const ANN = { ...zero, ClickedCount: 1, ContactID: BigInt(BIGC), DeliveredCount: 2, LastActivityAt: at(T0 + 500), OpenedCount: 1, ProcessedCount: 2, QueuedCount: 1, UnsubscribedCount: 1 };
const BOB = { ...zero, BouncedCount: 2, ContactID: 5, DeferredCount: 1, HardbouncedCount: 1, LastActivityAt: at(T0 + 30), ProcessedCount: 2, SoftbouncedCount: 1 };
const CID = { ...zero, BlockedCount: 1, ContactID: 6, DeliveredCount: 1, LastActivityAt: at(T0 + 900), ProcessedCount: 2, SpamComplaintCount: 1 };
const DEE = { ...zero, ContactID: 0, DeliveredCount: 1, LastActivityAt: at(T0 + 60), ProcessedCount: 1 };
const NAME = new Map<string, string>([[BIGC, 'ann'], ['5', 'bob'], ['6', 'cid'], ['0', 'dee']]);

const who = async (qs: string) => {
  const res = await f.get(`/v3/REST/contactstatistics?${qs}`);
  expect(res.status, qs).toBe(200);
  return (res.body as { Data: { ContactID: number | bigint }[] }).Data.map((r) => NAME.get(String(r.ContactID)));
};

describe('GET /v3/REST/contactstatistics', () => {
  it('lists distinct-message counts per contact, by ContactID, in Mailjet field order', async () => {
    const res = await f.get('/v3/REST/contactstatistics');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ Count: 4, Data: [DEE, BOB, CID, ANN], Total: 4 });
    expect(res.text).toContain(`"ContactID":${BIGC},`);
    expect(res.text).toContain(`"LastActivityAt":"2023-11-14T22:21:40Z"`);
    expect(Object.keys((res.body as { Data: object[] }).Data[0] as object)).toEqual(Object.keys(DEE).sort());
  });

  it('answers the item form by ContactID (digits) or Email', async () => {
    expect((await f.get('/v3/REST/contactstatistics/5')).body).toEqual({ Count: 1, Data: [BOB], Total: 1 });
    const big = await f.get(`/v3/REST/contactstatistics/${BIGC}`);
    expect(big.body).toEqual({ Count: 1, Data: [ANN], Total: 1 });
    expect(big.text).toContain(`"ContactID":${BIGC},`);
    expect((await f.get('/v3/REST/contactstatistics/bob@yahoo.com')).body).toEqual({ Count: 1, Data: [BOB], Total: 1 });
    expect((await f.get('/v3/REST/contactstatistics/BOB%40Yahoo.com')).body).toEqual({ Count: 1, Data: [BOB], Total: 1 });
    expect((await f.get('/v3/REST/contactstatistics/Dee@Example.org')).body).toEqual({ Count: 1, Data: [DEE], Total: 1 });
  });

  it('answers 404 for an unknown contact and for the other tenant’s', async () => {
    for (const path of ['999', '0', 'nobody@example.org', 'x%00y']) {
      expect(await f.get(`/v3/REST/contactstatistics/${path}`), path).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
    }
    expect((await f.get('/v3/REST/contactstatistics/6', f.keys.b)).status).toBe(404);
    expect((await f.get('/v3/REST/contactstatistics/bob@yahoo.com', f.keys.b)).status).toBe(404);
    // Tenant b's contact 5 is its own ann, not tenant a's bob.
    expect((await f.get('/v3/REST/contactstatistics/5', f.keys.b)).body).toEqual({ Count: 1, Data: [{ ...zero, ContactID: 5, DeliveredCount: 1, LastActivityAt: at(T0), ProcessedCount: 1 }], Total: 1 });
  });

  it.each([
    ['Blocked=true', ['cid']],
    ['Blocked=false', ['dee', 'bob', 'ann']],
    ['Bounced=1', ['bob']],
    ['Click=true', ['ann']],
    ['Click=0', ['dee', 'bob', 'cid']],
    ['Deferred=true', ['bob']],
    ['HardBounced=true', ['bob']],
    ['Hardbounced=false', ['dee', 'cid', 'ann']],
    ['SoftBounced=true', ['bob']],
    ['softbounced=TRUE', ['bob']],
    ['Open=true', ['ann']],
    ['Queued=true', ['ann']],
    ['Sent=true', ['dee', 'cid', 'ann']],
    ['Sent=false', ['bob']],
    ['Spam=true', ['cid']],
    ['Unsubscribed=true', ['ann']],
    ['Unsubscribed=false&Sent=true', ['dee', 'cid']],
    [`LastActivityAt=${T0 + 30}`, ['bob']],
    [`LastActivityAt=${at(T0 + 900)}`, ['cid']],
    // ann's last activity is T0 + 500 exactly: not greater.
    [`MinLastActivityAt=${T0 + 500}`, ['cid']],
    [`MinLastActivityAt=${T0 + 499}`, ['cid', 'ann']],
    // Greater than, as the reference has it: bob's last activity is T0 + 30 exactly.
    [`MinLastActivityAt=${T0 + 30}`, ['dee', 'cid', 'ann']],
    [`MinLastActivityAt=${T0 + 29}`, ['dee', 'bob', 'cid', 'ann']],
    [`MaxLastActivityAt=${T0 + 500}`, ['dee', 'bob']],
    [`MinLastActivityAt=${T0 + 59}&MaxLastActivityAt=${at(T0 + 500)}`, ['dee']],
    [`MinLastActivityAt=${T0 + 60}&MaxLastActivityAt=${at(T0 + 500)}`, []],
  ])('filters with %s', async (qs, expected) => {
    expect(await who(qs)).toEqual(expected);
  });

  it.each([
    ['ID', ['dee', 'bob', 'cid', 'ann']],
    ['ID DESC', ['ann', 'cid', 'bob', 'dee']],
    ['ProcessedCount', ['dee', 'bob', 'cid', 'ann']],
    ['ProcessedCount DESC', ['bob', 'cid', 'ann', 'dee']],
    ['LastActivityAt+DESC', ['cid', 'ann', 'dee', 'bob']],
    ['LastActivityAt', ['bob', 'dee', 'ann', 'cid']],
    ['BouncedCount desc, DeliveredCount DESC', ['bob', 'ann', 'dee', 'cid']],
    // Counts not tracked (always 0): every row ties, the next term or the tie-break orders them.
    ['WorkFlowExitedCount', ['dee', 'bob', 'cid', 'ann']],
    ['MarketingContacts DESC, ProcessedCount DESC', ['bob', 'cid', 'ann', 'dee']],
    ['UserMarketingContacts', ['dee', 'bob', 'cid', 'ann']],
  ])('sorts by %s', async (sort, expected) => {
    expect(await who(`Sort=${encodeURIComponent(sort)}`)).toEqual(expected);
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect((await f.get('/v3/REST/contactstatistics?Limit=2&Offset=1')).body).toEqual({ Count: 2, Data: [BOB, CID], Total: 4 });
    expect((await f.get('/v3/REST/contactstatistics?Limit=1&Sort=ID+DESC')).body).toEqual({ Count: 1, Data: [ANN], Total: 4 });
    expect((await f.get('/v3/REST/contactstatistics?countOnly=true&Sent=true')).body).toEqual({ Count: 3, Data: [], Total: 3 });
  });

  it.each([
    ['Blocked=maybe', /Invalid parameter Blocked: must be true, false, 1 or 0/],
    ['Hardbounced=2', /Invalid parameter Hardbounced: must be true, false, 1 or 0/],
    ['Unsubscribed=', /Invalid parameter Unsubscribed/],
    ['LastActivityAt=yesterday', /Invalid parameter LastActivityAt/],
    ['MinLastActivityAt=2024-02-30', /Invalid parameter MinLastActivityAt/],
    ['MaxLastActivityAt=-5', /Invalid parameter MaxLastActivityAt/],
    ['Sort=Email', /Invalid parameter Sort: "Email" is not a sortable property of contactstatistics/],
    ['Sort=ID%20UP', /Invalid parameter Sort/],
    ['Limit=1001', /Invalid parameter Limit/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/contactstatistics?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });

  it('answers 404 for a ContactID past 64 bits, however many digits (a whole number that names no contact)', async () => {
    for (const digits of [20, 21, 40]) {
      expect((await f.get(`/v3/REST/contactstatistics/${'9'.repeat(digits)}`)).body).toEqual({ ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 });
    }
  });
});
