import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { LOG_SELECT, type LogEventForWebhooks, type OpenBatch, enqueueEvents } from '../../../src/webhooks/enqueue.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { append } from '../../support/projections.js';
import { hook } from './fixture.js';

/**
 * Enqueueing (enqueue.ts), on both databases:
 * - A Version 2 batch waits at most the grouping window after its first event entered the log:
 *   events read as they arrive wait for company, events read later (a backlog, a dispatcher
 *   that was down) wait only for what is left of their window, or not at all.
 * - Version 1 first attempts that fit the fan-out process's free slots come back ready to send
 *   straight from the log, with no outbox row; the others get outbox rows for the claim query.
 */

const WINDOW_MS = 2000;
const LIMITS = { windowMs: WINDOW_MS, maxEvents: 100, maxBytes: 262_144 };

describe.each(DIALECTS)('Version 2 grouping window on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await hook(db, '5', { EventType: 'open', Url: 'http://127.0.0.1:9/grouped', Version: 2 });
  });
  afterAll(async () => cleanup?.());

  const opens = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(5000 + i), email: `w${i}@example.com`, EventID: `${prefix}-${i}` }));

  /** The log rows of these EventIDs as the fan-out reads them, and the seconds until the batch made of them is due. */
  async function enqueueAndDueIn(prefix: string, age: (rows: LogEventForWebhooks[]) => void): Promise<number> {
    const { rows } = await sql<LogEventForWebhooks>`SELECT ${LOG_SELECT} FROM events e WHERE e.event_id LIKE ${`${prefix}-%`} ORDER BY e.position`.execute(db.kysely);
    expect(rows.length).toBeGreaterThan(0);
    age(rows);
    const result = await db.kysely.transaction().execute((trx) => enqueueEvents(trx, rows, LIMITS, new Map()));
    expect(result.deliveries).toBe(1);
    const due = await sql<{ s: number }>`
      SELECT extract(epoch FROM due_at - now())::float8 AS s FROM webhook_deliveries
      WHERE positions[1] = ${rows[0]?.position} AND attempts = 0`.execute(db.kysely);
    return Number(due.rows[0]?.s);
  }

  it('reads how long ago each event entered the log', async () => {
    await append(db, '5', opens('fresh', 3));
    const { rows } = await sql<LogEventForWebhooks>`SELECT ${LOG_SELECT} FROM events e WHERE e.event_id LIKE 'fresh-%'`.execute(db.kysely);
    expect(rows).toHaveLength(3);
    for (const r of rows) {
      expect(typeof r.age_ms).toBe('number');
      expect(r.age_ms).toBeLessThan(10_000);
    }
  });

  it('keeps a batch of events read as they arrive open for the whole window', async () => {
    await append(db, '5', opens('now', 3));
    const dueIn = await enqueueAndDueIn('now', (rows) => {
      for (const r of rows) r.age_ms = 0;
    });
    expect(dueIn).toBeGreaterThan((WINDOW_MS - 200) / 1000);
    expect(dueIn).toBeLessThanOrEqual(WINDOW_MS / 1000 + 0.05);
  });

  it('waits only for what is left of the window after the first event arrived', async () => {
    await append(db, '5', opens('half', 3));
    const dueIn = await enqueueAndDueIn('half', (rows) => {
      for (const r of rows) r.age_ms = WINDOW_MS / 2;
    });
    expect(dueIn).toBeGreaterThan(WINDOW_MS / 2 / 1000 - 0.2);
    expect(dueIn).toBeLessThanOrEqual(WINDOW_MS / 2 / 1000 + 0.05);
  });

  it('sends a batch at once when its first event is older than the window', async () => {
    await append(db, '5', opens('old', 3));
    const dueIn = await enqueueAndDueIn('old', (rows) => {
      rows.forEach((r, i) => (r.age_ms = WINDOW_MS + 500 - i));
    });
    expect(dueIn).toBeLessThanOrEqual(0.05);
  });
});

describe.each(DIALECTS)('Version 1 first attempts sent straight from the log, on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let urlId: bigint;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    urlId = (await hook(db, '6', { EventType: 'open', Url: 'http://127.0.0.1:9/v1' })).id;
  });
  afterAll(async () => cleanup?.());

  it('hands as many first attempts as the claimer has slots over to be sent straight from the log, and leaves the rest to the outbox', async () => {
    const events = Array.from({ length: 5 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(7000 + i), email: `v${i}@example.com`, EventID: `v1-${i}` }));
    await append(db, '6', events);
    const { rows } = await sql<LogEventForWebhooks>`SELECT ${LOG_SELECT} FROM events e WHERE e.event_id LIKE 'v1-%' ORDER BY e.position`.execute(db.kysely);
    let slots = 2;
    const asked: bigint[] = [];
    const claimer = {
      reserve: (u: bigint) => {
        asked.push(u);
        return slots-- > 0;
      },
    };
    const result = await db.kysely.transaction().execute((trx) => enqueueEvents(trx, rows, LIMITS, new Map(), Date.now(), claimer));
    expect(result.deliveries).toBe(5);
    expect(asked).toEqual(Array(5).fill(urlId));
    expect(result.claimed.map((c) => c.webhookId)).toEqual([`msg_${rows[0]?.position}`, `msg_${rows[1]?.position}`]);
    expect(result.claimed.map((c) => c.direct)).toEqual([BigInt(rows[0]?.position ?? -1), BigInt(rows[1]?.position ?? -1)]);
    const first = result.claimed[0];
    expect(first?.id).toBe(0n);
    expect(first?.attempts).toBe(0);
    expect(first?.target).toMatchObject({ url: 'http://127.0.0.1:9/v1', version: 1, status: 'alive', isBackup: false, eventType: 'open' });
    expect(JSON.parse(first?.body ?? '')).toMatchObject({ event: 'open', email: 'v0@example.com' });
    expect(first?.target.secret.length).toBeGreaterThan(10);

    // Only the three left over are in the outbox, unclaimed.
    const stored = await sql<{ webhook_id: string; claim: string | null }>`SELECT webhook_id, claim FROM webhook_deliveries WHERE url_id = ${urlId} ORDER BY id`.execute(db.kysely);
    expect(stored.rows.map((r) => r.webhook_id)).toEqual(rows.slice(2).map((r) => `msg_${r.position}`));
    expect(stored.rows.every((r) => r.claim === null)).toBe(true);
  });
});

describe('Version 2 batch size on postgres', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  const limits = { windowMs: 60_000, maxEvents: 2000, maxBytes: 100_000 };

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
    await hook(db, '7', { EventType: 'open', Url: 'http://127.0.0.1:9/v2', Version: 2 });
  });
  afterAll(async () => cleanup?.());

  it('keeps a batch grown an event at a time, commas and brackets counted, within WEBHOOK_BATCH_MAX_BYTES', async () => {
    const events = Array.from({ length: 600 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(9000 + i), email: `size${i}@example.com`, EventID: `size-${i}` }));
    await append(db, '7', events);
    const { rows } = await sql<LogEventForWebhooks>`SELECT ${LOG_SELECT} FROM events e WHERE e.event_id LIKE 'size-%' ORDER BY e.position`.execute(db.kysely);
    let open = new Map<string, OpenBatch>();
    for (const row of rows) open = (await db.kysely.transaction().execute((trx) => enqueueEvents(trx, [row], limits, open))).openBatches;
    const batches = await sql<{ n: number; body: number }>`
      SELECT cardinality(events) AS n, octet_length('[' || array_to_string(events, ',') || ']') AS body FROM webhook_deliveries ORDER BY id`.execute(db.kysely);
    expect(batches.rows.reduce((s, b) => s + b.n, 0)).toBe(rows.length);
    expect(batches.rows.length).toBeGreaterThan(1);
    for (const b of batches.rows) expect(b.body).toBeLessThanOrEqual(limits.maxBytes);
  });
});
