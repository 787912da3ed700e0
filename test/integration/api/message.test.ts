import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { foldedText } from '../../../src/api/conventions/folded-text.js';
import { idOrder } from '../../../src/api/conventions/sort.js';
import { customIdCondition } from '../../../src/api/routes/message.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { BIG, BIG_N, D10, GUID, T0, loadMessageEvents } from './message-events-data.js';

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await loadMessageEvents(f);
});
afterAll(async () => f?.close());

/** Fields we hold no data for. */
const NEUTRAL = {
  AttachmentCount: 0, ContactAlt: '', DestinationID: 0, FilterTime: 0, IsClickTracked: false, IsHTMLPartIncluded: false, IsOpenTracked: false,
  IsTextPartIncluded: false, IsUnsubTracked: false, MessageSize: 0, SpamassRules: '', SpamassassinScore: 0, Subject: '',
};
const M2 = { ...NEUTRAL, ArrivedAt: '2023-11-14T22:13:30Z', AttemptCount: 3, CampaignID: 7, ContactID: 12, Delay: 0, ID: 2, SenderID: 9, StateID: 1, StatePermanent: true, Status: 'hardbounced', UUID: 'guid-2' };
const M3 = { ...NEUTRAL, ArrivedAt: '2023-11-24T22:13:20Z', AttemptCount: 1, CampaignID: 8, ContactID: 13, Delay: 0, ID: 3, SenderID: 5, StateID: 0, StatePermanent: false, Status: 'unsub', UUID: 'guid-3' };
const M4 = { ...NEUTRAL, ArrivedAt: '2023-11-14T22:13:25Z', AttemptCount: 0, CampaignID: 0, ContactID: 14, Delay: 0, ID: 4, SenderID: 0, StateID: 14, StatePermanent: true, Status: 'blocked', UUID: '' };
const M5 = { ...NEUTRAL, ArrivedAt: '2023-11-24T22:13:21Z', AttemptCount: 2, CampaignID: 8, ContactID: 15, Delay: 0, ID: 5, SenderID: 5, StateID: 12, StatePermanent: false, Status: 'softbounced', UUID: 'guid-5' };
// Queued at T0 - 2, soft-bounced (greylisted) at T0 - 1, sent at T0: Delay 2, two attempts.
const MBIG = { ...NEUTRAL, ArrivedAt: '2023-11-14T22:13:18Z', AttemptCount: 2, CampaignID: 7, ContactID: 11, Delay: 2, ID: BIG_N, SenderID: 9, StateID: 13, StatePermanent: false, Status: 'opened', UUID: GUID };
const ALL = [M2, M3, M4, M5, MBIG];

const list = async (qs: string, key = f.keys.a) => {
  const res = await f.get(`/v3/REST/message${qs === '' ? '' : `?${qs}`}`, key);
  expect(res.status, qs).toBe(200);
  return res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
};
const envelope = (data: Record<string, unknown>[]) => ({ Count: data.length, Data: data, Total: data.length });

describe('GET /v3/REST/message', () => {
  it("lists every message with its current status, with node-mailjet's Message fields in alphabetical order", async () => {
    const res = await f.get('/v3/REST/message');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(envelope(ALL));
    const keys = Object.keys((res.body as { Data: object[] }).Data[0] ?? {});
    expect(keys).toEqual([...keys].sort());
    expect(keys).toEqual([
      'ArrivedAt', 'AttachmentCount', 'AttemptCount', 'CampaignID', 'ContactAlt', 'ContactID', 'Delay', 'DestinationID', 'FilterTime', 'ID', 'IsClickTracked', 'IsHTMLPartIncluded',
      'IsOpenTracked', 'IsTextPartIncluded', 'IsUnsubTracked', 'MessageSize', 'SenderID', 'SpamassRules', 'SpamassassinScore', 'StateID', 'StatePermanent', 'Status', 'Subject', 'UUID',
    ]);
    expect(res.text).toContain(`"ID":${BIG},`);
  });

  it('shows the subject, the recipient address and the CustomID only when asked', async () => {
    expect(await list('ShowSubject=true')).toEqual(envelope([{ ...M2, Subject: 'Spring sale' }, { ...M3, Subject: 'Autumn news' }, M4, { ...M5, Subject: 'Autumn news' }, { ...MBIG, Subject: 'Spring sale' }]));
    // The address as the read models keep it: its ASCII letters folded (sent as Bob@Yahoo.com).
    expect(await list('ShowContactAlt=1&Limit=2')).toEqual({ Count: 2, Data: [{ ...M2, ContactAlt: 'bob@yahoo.com' }, { ...M3, ContactAlt: 'cy@hotmail.com' }], Total: 5 });
    const custom = await list(`ShowCustomID=true&Campaign=7`);
    expect(custom).toEqual(envelope([{ ...M2, CustomID: '' }, { ...MBIG, CustomID: 'order-1' }]));
    expect(Object.keys(custom.Data[0] ?? {}).indexOf('CustomID')).toBe(Object.keys(custom.Data[0] ?? {}).indexOf('ContactID') + 1);
    expect(await list('ShowSubject=false&ShowContactAlt=0&ShowCustomID=false')).toEqual(envelope(ALL));
  });

  it.each<[string, Record<string, unknown>[]]>([
    ['Campaign=7', [M2, MBIG]],
    ['CampaignID=8', [M3, M5]],
    ['Contact=14', [M4]],
    ['ContactID=11', [MBIG]],
    ['ContactAlt=bob@yahoo.COM', [M2]],
    ['ContactAlt=nobody@example.com', []],
    [`FromTS=${T0}&ToTS=${T0 + 11}`, [M2, M4]],
    [`FromTS=${D10}`, [M3, M5]],
    [`ToTS=2023-11-14T22:13:20Z`, [MBIG]],
    ['From=INFO@other.example', [M3, M5]],
    ['FromDomain=shop.example', [M2, MBIG]],
    ['SenderID=5', [M3, M5]],
    ['FromID=9', [M2, MBIG]],
    ['Sender=5', [M3, M5]],
    ['FromType=3', [M4]],
    ['FromType=2', [M2, M3, M5, MBIG]],
    ['FromType=1', []],
    ['MessageState=14', [M4]],
    ['MessageState=13', [MBIG]],
    ['MessageStatus=0', ALL],
    ['MessageStatus=1', []],
    ['MessageStatus=2', []],
    ['MessageStatus=3', [MBIG]],
    ['MessageStatus=4', []],
    ['MessageStatus=5', [M2, M5]],
    ['MessageStatus=6', []],
    ['MessageStatus=7', [M3]],
    ['MessageStatus=8', [M4]],
    ['MessageStatus=9', [M5]],
    ['MessageStatus=10', [M2]],
    ['MessageStatus=11', []],
    ['Campaign=7&MessageStatus=10', [M2]],
    ['CustomID=order-1', [MBIG]],
    ['CustomID=dee-1', [M4]],
    ['CustomID=ORDER-1', []],
    ['CustomID=order', []],
    ['CustomID=order-1&Campaign=8', []],
  ])('filters with %s', async (qs, expected) => {
    expect(await list(qs)).toEqual(envelope(expected));
  });

  it('sorts by ID and ArrivedAt in both directions', async () => {
    expect(await list('Sort=ID DESC')).toEqual(envelope([MBIG, M5, M4, M3, M2]));
    expect(await list('Sort=ArrivedAt')).toEqual(envelope([MBIG, M4, M2, M3, M5]));
    expect(await list('Sort=ArrivedAt+DESC')).toEqual(envelope([M5, M3, M2, M4, MBIG]));
    expect(await list('Sort=id asc')).toEqual(envelope(ALL));
  });

  it('pages with Limit/Offset and counts with countOnly', async () => {
    expect(await list('Limit=2&Offset=2')).toEqual({ Count: 2, Data: [M4, M5], Total: 5 });
    expect(await list('Limit=2&Offset=4')).toEqual({ Count: 1, Data: [MBIG], Total: 5 });
    expect(await list('countOnly=1')).toEqual({ Count: 5, Data: [], Total: 5 });
    expect(await list('countOnly=1&Campaign=8')).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it('answers one message by its id, a 64-bit one exactly, with the Show* switches', async () => {
    const big = await f.get(`/v3/REST/message/${BIG}?ShowSubject=true&showcontactalt=1&ShowCustomID=true`);
    expect(big.body).toEqual(envelope([{ ...MBIG, ContactAlt: 'ann@gmail.com', CustomID: 'order-1', Subject: 'Spring sale' }]));
    expect(big.text).toContain(`"ID":${BIG},`);
    expect((await f.get('/v3/REST/message/4')).body).toEqual(envelope([M4]));
  });

  it('keeps tenants apart', async () => {
    const b2 = { ...NEUTRAL, ArrivedAt: '2023-11-14T22:13:20Z', AttemptCount: 2, CampaignID: 7, ContactID: 99, Delay: 0, ID: 2, SenderID: 0, StateID: 1, StatePermanent: true, Status: 'clicked', UUID: 'guid-b2' };
    expect((await f.get('/v3/REST/message/2', f.keys.b)).body).toEqual(envelope([b2]));
    expect(await list('Limit=1', f.keys.b)).toEqual({ Count: 1, Data: [b2], Total: 3 });
    expect(await f.get('/v3/REST/message/3', f.keys.b)).toMatchObject({ status: 404, body: { ErrorInfo: '', ErrorMessage: 'Object not found', StatusCode: 404 } });
    expect(await f.get('/v3/REST/message/6')).toMatchObject({ status: 404 });
  });

  it('lists a message whose delivery events have not arrived, with ArrivedAt ""', async () => {
    expect((await f.get('/v3/REST/message/6', f.keys.b)).body).toMatchObject({ Data: [{ ArrivedAt: '', ID: 6, Status: 'opened', AttemptCount: 0 }] });
    expect(await list('MessageStatus=0', f.keys.b)).toMatchObject({ Total: 2 });
    expect(await list('MessageStatus=3', f.keys.b)).toMatchObject({ Total: 1, Data: [{ ID: 6 }] });
    expect(await list('MessageStatus=4', f.keys.b)).toMatchObject({ Total: 1, Data: [{ ID: 2 }] });
    expect(await list('MessageStatus=2', f.keys.b)).toMatchObject({ Total: 1, Data: [{ ID: BIG_N }] });
    // Its CustomID is found once a delivery event carries it.
    expect(await list('CustomID=xu-1', f.keys.b)).toEqual(envelope([]));
  });

  it("finds a message by CustomID within the caller's own messages only", async () => {
    expect(await list('CustomID=order-1', f.keys.b)).toMatchObject({ Total: 1, Data: [{ ID: BIG_N, ContactID: 98 }] });
    expect(await list('CustomID=dee-1', f.keys.b)).toEqual(envelope([]));
  });

  it('answers a CustomID filter through the log index on it, whatever the value', async () => {
    expect(await customIdPlan(f)).toMatch(/events_custom_id_idx/);
  });

  it('answers 404 for an unknown message and 400 naming the parameter for a malformed id or Show switch', async () => {
    expect(await f.get('/v3/REST/message/999')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/message/x1')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/^Invalid parameter ID:/) } });
    expect(await f.get('/v3/REST/message/2?ShowSubject=maybe')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/^Invalid parameter ShowSubject:/) } });
  });

  it.each([
    ['Campaign=x', /Campaign/],
    ['CampaignID=9223372036854775808', /Invalid parameter CampaignID: is beyond the signed 64-bit range/],
    ['Contact=-4', /Contact/],
    ['ContactAlt=%00', /ContactAlt/],
    ['FromTS=noon', /FromTS/],
    [`FromTS=${T0}&ToTS=${T0 - 1}`, /ToTS: must be later than FromTS/],
    ['SenderID=abc', /SenderID/],
    ['FromType=5', /FromType/],
    ['MessageState=0', /MessageState: must be at least 1/],
    ['MessageState=22', /MessageState/],
    ['MessageStatus=99', /MessageStatus/],
    ['ShowSubject=2', /ShowSubject/],
    ['ShowContactAlt=on', /ShowContactAlt/],
    ['ShowCustomID=x', /ShowCustomID/],
    [`CustomID=${'x'.repeat(256)}`, /CustomID/],
    ['Destination=3', /Destination: not supported/],
    ['PlanSubscription=1', /PlanSubscription: not supported/],
    ['BounceReason=user%20unknown', /BounceReason: not supported/],
    ['Limit=-1', /Limit/],
    ['Sort=Status', /Sort: "Status" is not a sortable property of message; sort by ID, ArrivedAt/],
  ])('answers 400 naming the parameter for %s', async (qs, message) => {
    const res = await f.get(`/v3/REST/message?${qs}`);
    expect(res.status, qs).toBe(400);
    expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(message), StatusCode: 400 });
  });
});

describe('GET /v3/REST/message filters on a tenant with many messages', () => {
  // 20,000 messages of tenant 900 in 20 campaigns of consecutive ids (as Mailjet's grow), one
  // second apart: the filters' plans, on a table large enough for them to matter.
  const TENANT = '900';
  beforeAll(async () => {
    await sql`INSERT INTO messages (api_key_id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, email, recipient_domain, esp,
        message_time, status, state_id, is_state_permanent, first_open_at, first_click_at, last_activity_at, attempt_count, event_count)
      SELECT ${TENANT}::int8, 1000000 + i, i, 500 + i / 1000, 0, 0, '', '', '', 'User' || i || '@Example.com', 'example.com', 'Other',
        1700000000 + i, 'sent', NULL, false, NULL, NULL, 1700000000 + i, 1, 1
      FROM generate_series(0, 19999) AS i`.execute(f.db.kysely);
    await sql`ANALYZE messages`.execute(f.db.kysely);
  });

  /** Rows the plan of a page (10, by id) read from `messages`, with `where` beside the tenant. */
  async function rowsRead(where: ReturnType<typeof sql>, filtered: boolean): Promise<number> {
    const q = sql`SELECT t.message_id FROM messages t WHERE t.api_key_id = ${TENANT}::int8 AND ${where} ORDER BY ${idOrder(sql.ref('t.message_id'), filtered)} LIMIT 10`.compile(f.db.kysely);
    const explained = await sql.raw<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.sql.replace(/\$1/g, TENANT)}`).execute(f.db.kysely);
    let read = 0;
    const walk = (node: Record<string, unknown>) => {
      if (node['Relation Name'] === 'messages') read += Number(node['Actual Rows']) + Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0);
      for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk(((explained.rows[0]?.['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0] as { Plan: Record<string, unknown> }).Plan);
    return read;
  }

  it('reads a late campaign`s messages, or a recent time range`s, not the tenant`s up to them', async () => {
    // By the primary key's order (the code before) the planner walked it: 19,010 and 19,510 rows read.
    expect(await rowsRead(sql`t.campaign_id = 519`, true)).toBeLessThanOrEqual(1000);
    expect(await rowsRead(sql`t.message_time >= 1700019500`, true)).toBeLessThanOrEqual(500);
    // Unfiltered, the primary key gives the page at once.
    expect(await rowsRead(sql`true`, false)).toBe(10);
  });

  it('answers ContactAlt through an index on the folded address', async () => {
    const q = sql`SELECT t.message_id FROM messages t WHERE t.api_key_id = ${TENANT}::int8 AND lower(t.email) = ${foldedText('user77@example.com')}`.compile(f.db.kysely);
    const plan = await f.db.kysely.connection().execute(async (c) => {
      await sql`SET enable_seqscan = off`.execute(c);
      try {
        const explained = await sql.raw<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${q.sql.replace('$1', TENANT).replace('$2', "'user77@example.com'")}`).execute(c);
        return explained.rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        await sql`RESET enable_seqscan`.execute(c);
      }
    });
    expect(plan).toMatch(/Index (Only )?Scan using messages__api_key_id_lower_email_idx/);
  });
});

describe('GET /v3/REST/message?CustomID on the embedded database', () => {
  let e: ApiFixture;
  beforeAll(async () => {
    e = await openApiFixture({ dialect: 'pglite' });
    await loadMessageEvents(e);
  });
  afterAll(async () => e?.close());

  it('finds the message through the same index', async () => {
    const res = await e.get('/v3/REST/message?CustomID=order-1');
    expect(res.body).toEqual(envelope([MBIG]));
    expect(await customIdPlan(e)).toMatch(/events_custom_id_idx/);
  });
});

/**
 * The plan of the CustomID filter's statement as the API sends it ($1 the tenant, $2 the id),
 * planned once for any value (a generic plan): the index can be used only if the query implies
 * its partial predicate.
 */
async function customIdPlan(fixture: ApiFixture): Promise<string> {
  const where = customIdCondition(fixture.keys.a.APIKeyID, 'order-1');
  const q = sql`SELECT t.message_id FROM messages t WHERE ${where}`.compile(fixture.db.kysely);
  return fixture.db.kysely.connection().execute(async (c) => {
    await sql`SET plan_cache_mode = force_generic_plan`.execute(c);
    await sql`SET enable_seqscan = off`.execute(c);
    await sql.raw(`PREPARE by_custom_id AS ${q.sql}`).execute(c);
    try {
      const explained = await sql.raw<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) EXECUTE by_custom_id(${fixture.keys.a.APIKeyID}, 'order-1')`).execute(c);
      return explained.rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await sql`DEALLOCATE by_custom_id`.execute(c);
      await sql`RESET plan_cache_mode`.execute(c);
      await sql`RESET enable_seqscan`.execute(c);
    }
  });
}
