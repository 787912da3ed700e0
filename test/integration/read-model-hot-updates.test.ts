import { CompiledQuery, type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contactStatistics } from '../../projections/contact-statistics.js';
import { listRecipientStatistics } from '../../projections/list-recipient-statistics.js';
import { messages } from '../../projections/messages.js';
import type { Db } from '../../src/db/connect.js';
import { down as migrationDown, up as migrationUp } from '../../src/db/migrations/0005-hot-read-models.js';
import { type Batch, computeBatch } from '../../src/projector/batch.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { writeQuery } from '../../src/projector/write-delta.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append } from '../support/projections.js';

/**
 * The read models whose rows a message's every event rewrites keep the changing columns out of
 * their indexes and room on their pages, so the rewrite is a HOT update: Postgres's own count of
 * this transaction's updates says so. Re-adding an index on `status` or `last_activity_at`, or
 * dropping the fillfactor, makes this fail.
 */
const REWRITTEN = [messages, contactStatistics, listRecipientStatistics];
const TABLES = ['messages', 'contact_stats', 'list_recipient_stats'];

describe.each(DIALECTS)('read models rewritten by every event on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await ensureProjectionTables(db.kysely, REWRITTEN);
  });
  afterAll(async () => {
    await cleanup();
  });

  it('update a row in place when a later event of its message arrives (HOT: no index touched)', async () => {
    const [sent, open] = ['sent', 'open'].map((type) => ({ ...sampleEvents().find((e) => e['event'] === type), mj_list_id: 3 }));
    await append(db, '1', [sent as Record<string, unknown>]);
    const cursors = REWRITTEN.map((projection) => ({ projection, position: 0n }));
    const first = await computeBatch(db, cursors, 100);
    await append(db, '1', [open as Record<string, unknown>]);
    const second = await computeBatch(db, cursors.map((c) => ({ ...c, position: first?.to ?? 0n })), 100);
    const write = (b: Batch | null) => {
      if (b === null) throw new Error('no batch');
      const { statement, params } = writeQuery([...b.deltas.values()], '', null);
      return CompiledQuery.raw(statement.text, params);
    };
    const counts = await db.kysely.connection().execute(async (conn) => {
      await sql`BEGIN`.execute(conn);
      try {
        await conn.executeQuery(write(first));
        await conn.executeQuery(write(second));
        const out: Record<string, { updated: number; hot: number; status: unknown }> = {};
        for (const table of TABLES) {
          const { rows } = await sql<{ updated: string; hot: string }>`
            SELECT pg_stat_get_xact_tuples_updated(${table}::regclass)::text AS updated,
                   pg_stat_get_xact_tuples_hot_updated(${table}::regclass)::text AS hot`.execute(conn);
          out[table] = { updated: Number(rows[0]?.updated), hot: Number(rows[0]?.hot), status: undefined };
        }
        const status = await sql<{ status: string }>`SELECT status FROM messages`.execute(conn);
        out['messages'] = { ...(out['messages'] ?? { updated: 0, hot: 0 }), status: status.rows.map((r) => r.status) };
        return out;
      } finally {
        await sql`ROLLBACK`.execute(conn);
      }
    });
    expect(counts).toEqual({
      messages: { updated: 1, hot: 1, status: ['opened'] },
      contact_stats: { updated: 1, hot: 1, status: undefined },
      list_recipient_stats: { updated: 1, hot: 1, status: undefined },
    });
  });

  it('are made with pages kept a fifth free and no index on the columns events change', async () => {
    const { rows } = await sql<{ relname: string; reloptions: string[] | null }>`
      SELECT relname, reloptions FROM pg_class WHERE relname IN (${sql.join(TABLES)}) ORDER BY relname`.execute(db.kysely);
    expect(rows.map((r) => [r.relname, r.reloptions])).toEqual([
      ['contact_stats', ['fillfactor=80']],
      ['list_recipient_stats', ['fillfactor=80']],
      ['messages', ['fillfactor=80']],
    ]);
    const indexed = await sql<{ indexdef: string }>`SELECT indexdef FROM pg_indexes WHERE tablename IN (${sql.join(TABLES)})`.execute(db.kysely);
    expect(indexed.rows.filter((r) => /\b(status|last_activity_at)\b/.test(r.indexdef))).toEqual([]);
  });

  it('are brought in line by migration 0005 when made before it', async () => {
    await sql`CREATE INDEX messages__api_key_id_status_idx ON messages (api_key_id, status)`.execute(db.kysely);
    await sql`CREATE INDEX contact_stats__api_key_id_last_activity_at_idx ON contact_stats (api_key_id, last_activity_at)`.execute(db.kysely);
    for (const table of TABLES) await sql.raw(`ALTER TABLE ${table} RESET (fillfactor)`).execute(db.kysely);
    await migrationUp(db.kysely as unknown as Kysely<unknown>);
    const { rows } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM pg_class WHERE relname IN (${sql.join(TABLES)}) AND reloptions = '{fillfactor=80}'`.execute(db.kysely);
    expect(rows[0]?.n).toBe('3');
    const indexed = await sql<{ indexname: string }>`SELECT indexname FROM pg_indexes WHERE tablename IN (${sql.join(TABLES)}) AND indexdef ~ '(status|last_activity_at)'`.execute(db.kysely);
    expect(indexed.rows).toEqual([]);
  });

  it('are put back as they were by migration 0005 going down', async () => {
    const kysely = db.kysely as unknown as Kysely<unknown>;
    await migrationDown(kysely);
    const { rows } = await sql<{ relname: string; reloptions: string[] | null }>`
      SELECT relname, reloptions FROM pg_class WHERE relname IN (${sql.join(TABLES)}) ORDER BY relname`.execute(db.kysely);
    expect(rows).toEqual(TABLES.toSorted().map((relname) => ({ relname, reloptions: null })));
    const indexed = await sql<{ indexname: string }>`SELECT indexname FROM pg_indexes WHERE tablename IN (${sql.join(TABLES)}) AND indexdef ~ '(status|last_activity_at)' ORDER BY indexname`.execute(db.kysely);
    expect(indexed.rows.map((r) => r.indexname)).toEqual([
      'contact_stats__api_key_id_last_activity_at_idx',
      'list_recipient_stats__api_key_id_last_activity_at_idx',
      'messages__api_key_id_status_idx',
    ]);
    await migrationUp(kysely);
  });
});
