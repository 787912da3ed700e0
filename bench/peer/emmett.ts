import { getPostgreSQLEventStore, messagesTable, postgreSQLProjection, rebuildPostgreSQLProjections } from '@event-driven-io/emmett-postgresql';
import pg from 'pg';
import type { LogEventRow } from '../../src/events/decode.js';

/**
 * The peer side: the same decoded events in emmett's PostgreSQL event store (one stream per
 * message), and one read model rebuilt from it with emmett's own rebuild
 * (`rebuildPostgreSQLProjections`: an async projector pulling batches from emmett's message
 * table, handling them one event at a time, storing its checkpoint after each, one transaction
 * per batch).
 */

/** The log row's columns as the event's data (`payload` is the raw JSON text, kept as a string). */
type MailData = { [K in keyof LogEventRow]: LogEventRow[K] };
type MailEvent = { type: string; data: MailData };

const COUNTED = ['sent', 'open', 'click', 'bounce'] as const;

export async function emmettAppend(url: string, messages: readonly LogEventRow[][], concurrency: number): Promise<number> {
  const store = getPostgreSQLEventStore(url, { connectionOptions: { pooled: true } });
  try {
    await store.schema.migrate();
    const started = performance.now();
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < messages.length; i = next++) {
        const rows = messages[i] ?? [];
        const first = rows[0];
        if (first === undefined) continue;
        const events: MailEvent[] = rows.map((row) => ({ type: row.type, data: { ...row } }));
        await store.appendToStream(`message-${first.api_key_id}-${first.message_id ?? first.event_id}`, events);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return performance.now() - started;
  } finally {
    await store.close();
  }
}

/**
 * Per tenant and campaign, the number of distinct messages with a sent, open, click and bounce
 * event (campaign 0, i.e. none, left out): a `seen` table of (tenant, message, type) decides
 * whether an event is a message's first of its type.
 */
export const campaignCounters = postgreSQLProjection<MailEvent>({
  name: 'peer_campaign_counters',
  version: 1,
  canHandle: [...COUNTED],
  init: async ({ context }) => {
    await context.connection.client.query(`
      CREATE TABLE IF NOT EXISTS peer_seen (api_key_id int8, message_id int8, type text, PRIMARY KEY (api_key_id, message_id, type));
      CREATE TABLE IF NOT EXISTS peer_campaign_counters (
        api_key_id int8, campaign_id int8, sent int8 NOT NULL, opened int8 NOT NULL, clicked int8 NOT NULL, bounced int8 NOT NULL,
        PRIMARY KEY (api_key_id, campaign_id))`);
  },
  truncate: async (context) => {
    await context.connection.client.query('TRUNCATE peer_seen, peer_campaign_counters');
  },
  handle: async (events, context) => {
    const rows = events.map((e) => e.data).filter((d) => d.campaign_id !== '0' && d.message_id !== null);
    if (rows.length === 0) return;
    await context.connection.client.query(
      `WITH ev AS (SELECT * FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::text[]) AS t(api_key_id, campaign_id, message_id, type)),
       first AS (
         INSERT INTO peer_seen (api_key_id, message_id, type) SELECT api_key_id, message_id, type FROM ev
         ON CONFLICT DO NOTHING RETURNING api_key_id, message_id, type)
       INSERT INTO peer_campaign_counters AS c (api_key_id, campaign_id, sent, opened, clicked, bounced)
       SELECT ev.api_key_id, ev.campaign_id,
         count(*) FILTER (WHERE ev.type = 'sent'), count(*) FILTER (WHERE ev.type = 'open'),
         count(*) FILTER (WHERE ev.type = 'click'), count(*) FILTER (WHERE ev.type = 'bounce')
       FROM first JOIN (SELECT DISTINCT * FROM ev) ev USING (api_key_id, message_id, type)
       GROUP BY 1, 2
       ON CONFLICT (api_key_id, campaign_id) DO UPDATE SET
         sent = c.sent + excluded.sent, opened = c.opened + excluded.opened,
         clicked = c.clicked + excluded.clicked, bounced = c.bounced + excluded.bounced`,
      [rows.map((d) => d.api_key_id), rows.map((d) => d.campaign_id), rows.map((d) => d.message_id), rows.map((d) => d.type)],
    );
  },
});

/** Rebuilds `peer_campaign_counters` from emmett's store; returns elapsed ms. */
export async function emmettRebuild(url: string, batchSize: number): Promise<number> {
  const started = performance.now();
  // pullingFrequencyInMs: the puller sleeps this long between two full batches (default 50 ms).
  const consumer = rebuildPostgreSQLProjections<MailEvent>({ connectionString: url, projections: [campaignCounters], pulling: { batchSize, pullingFrequencyInMs: 0 } });
  try {
    await consumer.start();
  } finally {
    await consumer.close();
  }
  return performance.now() - started;
}

/**
 * Counted events that a rebuild skips as already handled: emmett reads in (transaction_id,
 * global_position) order but checkpoints, and skips, by global_position alone, so an event whose
 * position is below one already handled (concurrent appends committing out of position order)
 * is passed over. 0 when the appends ran one at a time.
 */
export async function countSkippable(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM (
         SELECT global_position, max(global_position) OVER (ORDER BY transaction_id, global_position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS handled
         FROM ${messagesTable.name} WHERE message_type = ANY($1)) t
       WHERE global_position < handled`,
      [[...COUNTED]],
    );
    return Number(r.rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** The counters, `api_key_id:campaign_id` → [sent, opened, clicked, bounced]. */
export async function readEmmettCounters(url: string): Promise<Map<string, number[]>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query<{ k: string; sent: string; opened: string; clicked: string; bounced: string }>(
      `SELECT api_key_id || ':' || campaign_id AS k, sent, opened, clicked, bounced FROM peer_campaign_counters`,
    );
    return new Map(r.rows.map((x) => [x.k, [Number(x.sent), Number(x.opened), Number(x.clicked), Number(x.bounced)]]));
  } finally {
    await client.end();
  }
}
