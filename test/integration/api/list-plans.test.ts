import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { type PlanNode, explainAnalyze, planNodes, rowsRead, statementRecorder } from '../../support/plan-reads.js';

/**
 * The plans of list statements as the API sends them, on a tenant large enough for them to
 * matter: 20,000 rows in each table, in 20 campaigns (and lists) of 1,000 consecutive ids, one
 * second apart, as Mailjet's ids grow with time; tenant b has as many messages.
 */

const recorder = statementRecorder();
let f: ApiFixture;
const T = 1_700_000_000;
const N = 20_000;
/** The messages' statuses, in turn; every seventh message has no delivery event (no time). */
const STATUSES = ['queued', 'sent', 'opened', 'clicked', 'softbounced', 'hardbounced', 'spam', 'unsub', 'blocked', 'deferred'];

beforeAll(async () => {
  f = await openApiFixture({ plugins: [recorder.plugin] });
  const db = f.db.kysely;
  const tenant = f.keys.a.APIKeyID;
  // Row i: message 1,000,000 + i, event (log position) i + 1, contact i, campaign and list 500 + i / 1000, at T + i.
  const dims = sql`500 + i / 1000, 500 + i / 1000, 0, '', '', ''`;
  for (const key of [f.keys.a.APIKeyID, f.keys.b.APIKeyID]) {
    await sql`INSERT INTO messages (api_key_id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, email, recipient_domain, esp,
        message_time, status, state_id, is_state_permanent, first_open_at, first_click_at, last_activity_at, attempt_count, event_count)
      SELECT ${key}::int8, 1000000 + i, i, ${dims}, 'user' || i || '@example.com', 'example.com', 'Other',
        CASE WHEN i % 7 = 0 THEN NULL ELSE ${T} + i END, (${STATUSES}::text[])[1 + i % ${STATUSES.length}], NULL, false, NULL, NULL, ${T} + i, 1, 1
      FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  }
  await sql`INSERT INTO open_info (api_key_id, message_id, id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign,
      opened_at, arrived_at, user_agent_id, user_agent_full, ua_platform, ua_client)
    SELECT ${tenant}::int8, 1000000 + i, i + 1, i, ${dims}, ${T} + i, ${T} + i - 60, 1, '', '', '' FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await sql`INSERT INTO click_stats (api_key_id, id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign,
      clicked_at, clicked_delay, url, user_agent_id, ua_platform, ua_client)
    SELECT ${tenant}::int8, i + 1, 1000000 + i, i, ${dims}, ${T} + i, 60, 'https://example.com/', 1, '', '' FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await sql`INSERT INTO bounce_stats (api_key_id, id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign,
      bounced_at, is_blocked, is_state_permanent, state_id, error_related_to, error)
    SELECT ${tenant}::int8, i + 1, 1000000 + i, i, ${dims}, ${T} + i, false, true, 1, 'recipient', 'user unknown' FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await sql`INSERT INTO contact_stats (api_key_id, email, processed, delivered, messages, named, contact_id, last_activity_at)
    SELECT ${tenant}::int8, 'user' || i || '@example.com', 1, 1, 1, 1, i, ${T} + i FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  // ListRecipientID is a hash of the tenant, list and address: in no order of time.
  await sql`INSERT INTO list_recipient_stats (api_key_id, list_id, email, processed, delivered, messages, named, list_recipient_id, contact_id, last_activity_at)
    SELECT ${tenant}::int8, 500 + i / 1000, 'user' || i || '@example.com', 1, 1, 1, 1, abs(hashint4(i)), i, ${T} + i FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await sql`ANALYZE messages, open_info, click_stats, bounce_stats, contact_stats, list_recipient_stats`.execute(db);
});
afterAll(async () => f?.close());

/** GET `path` (tenant a): its records, and the plan of the one statement it sent that `pick` matches. */
async function planOf(path: string, pick: RegExp): Promise<{ plan: PlanNode; data: Record<string, unknown>[]; total: number }> {
  recorder.take(f.db.kysely);
  const res = await f.get(path);
  expect(res.status, path).toBe(200);
  const picked = recorder.take(f.db.kysely).filter((s) => pick.test(s.sql));
  expect(picked, path).toHaveLength(1);
  const plan = await explainAnalyze(f.db.kysely, picked[0] as (typeof picked)[number]);
  const body = res.body as { Data: Record<string, unknown>[]; Total: number };
  return { plan, data: body.Data, total: body.Total };
}

/** The rows the page statement of GET `path` read from `table`, and the page's record ids. */
async function pageReads(path: string, table: string): Promise<{ read: number; ids: unknown[] }> {
  const { plan, data } = await planOf(path, /\bLIMIT\b/);
  return { read: rowsRead(plan, table), ids: data.map((r) => r['ID'] ?? r['ContactID'] ?? r['ListRecipientID']) };
}

const range = (from: number, n: number, step = 1) => Array.from({ length: n }, (_, k) => from + k * step);

describe('a page filtered through an index reads its matches, not the tenant', () => {
  // By the id's own order (the code before) the planner walked the id's index past the earlier
  // campaigns' rows: 19,010 rows read for the late campaign's page (19,011 on bounce_stats,
  // 19,512 for the recent MinLastActivityAt).
  it('openinformation: a late campaign, a recent EventFromTs, an early campaign by ID DESC', async () => {
    const late = await pageReads('/v3/REST/openinformation?CampaignID=519', 'open_info');
    expect(late.read).toBeLessThanOrEqual(1000);
    expect(late.ids).toEqual(range(1_019_000, 10));
    expect((await pageReads(`/v3/REST/openinformation?EventFromTs=${T + 19_500}`, 'open_info')).read).toBeLessThanOrEqual(500);
    const early = await pageReads('/v3/REST/openinformation?CampaignID=500&Sort=ID+DESC', 'open_info');
    expect(early.read).toBeLessThanOrEqual(1000);
    expect(early.ids).toEqual(range(1_000_999, 10, -1));
    // Unfiltered, the primary key gives the page at once.
    const all = await pageReads('/v3/REST/openinformation', 'open_info');
    expect(all.read).toBe(10);
    expect(all.ids).toEqual(range(1_000_000, 10));
  });

  it('clickstatistics: a late campaign, a recent EventFromTs', async () => {
    const late = await pageReads('/v3/REST/clickstatistics?CampaignID=519', 'click_stats');
    expect(late.read).toBeLessThanOrEqual(1000);
    expect(late.ids).toEqual(range(19_001, 10));
    expect((await pageReads(`/v3/REST/clickstatistics?EventFromTs=${T + 19_500}&Sort=ID`, 'click_stats')).read).toBeLessThanOrEqual(500);
    expect((await pageReads('/v3/REST/clickstatistics', 'click_stats')).read).toBe(10);
  });

  it('bouncestatistics: a late campaign', async () => {
    const late = await pageReads('/v3/REST/bouncestatistics?CampaignID=519', 'bounce_stats');
    expect(late.read).toBeLessThanOrEqual(1000);
    expect(late.ids).toEqual(range(1_019_000, 10));
    // The message id's index, then the log position among a message's bounces: one row past the page.
    expect((await pageReads('/v3/REST/bouncestatistics', 'bounce_stats')).read).toBeLessThanOrEqual(11);
  });

  it('contactstatistics: a recent MinLastActivityAt', async () => {
    const recent = await pageReads(`/v3/REST/contactstatistics?MinLastActivityAt=${T + 19_500}`, 'contact_stats');
    expect(recent.read).toBeLessThanOrEqual(500);
    expect(recent.ids).toEqual(range(19_501, 10));
    expect((await pageReads('/v3/REST/contactstatistics', 'contact_stats')).read).toBeLessThanOrEqual(11);
  });

  it('listrecipientstatistics: one contact, one list', async () => {
    // Hashed ids are in no order of time, so the walk found these about where the planner expected (176
    // rows for the list's page); sorting the matches reads what counting them reads (1,000).
    expect((await pageReads('/v3/REST/listrecipientstatistics?Contact=19990', 'list_recipient_stats')).read).toBeLessThanOrEqual(10);
    expect((await pageReads('/v3/REST/listrecipientstatistics?ContactsList=519', 'list_recipient_stats')).read).toBeLessThanOrEqual(1000);
    expect((await pageReads('/v3/REST/listrecipientstatistics', 'list_recipient_stats')).read).toBeLessThanOrEqual(11);
  });
});

describe('a page filtered only where no index answers keeps the id order', () => {
  // Counting the matches reads the tenant anyway; the walk stops at the page when matches are
  // common, where sorting them read all 20,000 rows.
  it.each([
    ['/v3/REST/contactstatistics?Spam=false', 'contact_stats'],
    ['/v3/REST/listrecipientstatistics?IsActive=true', 'list_recipient_stats'],
    ['/v3/REST/openinformation?MessageStatus=0', 'open_info'],
    ['/v3/REST/message?MessageStatus=0', 'messages'],
    ['/v3/REST/message?MessageStatus=3', 'messages'],
  ])('%s', async (path, table) => {
    expect((await pageReads(path, table)).read).toBeLessThanOrEqual(200);
  });
});

describe('GET /v3/REST/message?MessageStatus', () => {
  it('reads the messages once, the tenant`s only', async () => {
    // With an EXISTS on messages the count read the table twice, every tenant's rows in one of
    // the passes (60,000 rows and more here).
    for (const code of [0, 3, 5]) {
      const { plan } = await planOf(`/v3/REST/message?MessageStatus=${code}&countOnly=1`, /count\(\*\)/);
      expect(planNodes(plan).filter((n) => n['Relation Name'] === 'messages'), `MessageStatus=${code}`).toHaveLength(1);
      expect(rowsRead(plan, 'messages'), `MessageStatus=${code}`).toBeLessThanOrEqual(N);
    }
  });

  it('matches the messages it matched through the messages read model, for every status', async () => {
    const tenant = f.keys.a.APIKeyID;
    for (const code of range(0, 12)) {
      const { data, total } = await planOf(`/v3/REST/message?MessageStatus=${code}&Limit=1000&Sort=ID+DESC`, /\bLIMIT\b/);
      // The condition as it was: the message's row found again in `messages`.
      const statuses: Record<number, string[]> = {
        1: ['queued'], 2: ['sent'], 3: ['opened'], 4: ['clicked'], 5: ['softbounced', 'hardbounced'], 6: ['spam'],
        7: ['unsub'], 8: ['blocked'], 9: ['softbounced'], 10: ['hardbounced'], 11: ['deferred'],
      };
      const match = code === 0 ? sql`g.message_time IS NOT NULL` : sql`g.status = ANY(${statuses[code] ?? []}::text[])`;
      const { rows } = await sql<{ id: string }>`SELECT t.message_id::text AS id FROM messages t WHERE t.api_key_id = ${tenant}::int8
        AND EXISTS (SELECT 1 FROM messages g WHERE g.api_key_id = ${tenant}::int8 AND g.message_id = t.message_id AND ${match})
        ORDER BY t.message_id DESC`.execute(f.db.kysely);
      expect(total, `MessageStatus=${code}`).toBe(rows.length);
      expect(data.map((r) => String(r['ID'])), `MessageStatus=${code}`).toEqual(rows.slice(0, 1000).map((r) => r.id));
    }
  });
});
