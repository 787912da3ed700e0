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

const range = (from: number, n: number, step = 1) => Array.from({ length: n }, (_, k) => from + k * step);

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
