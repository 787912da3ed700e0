import { CompiledQuery, type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messages } from '../../projections/messages.js';
import type { Db } from '../../src/db/connect.js';
import { down as migrationDown, up as migrationUp } from '../../src/db/migrations/0005-hot-read-models.js';
import { computeBatch } from '../../src/projector/batch.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { writeQuery } from '../../src/projector/write-delta.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append } from '../support/projections.js';

/**
 * `messages`, whose row a message's every event rewrites, keeps the changing columns out of its
 * indexes and room on its pages, so the rewrite is a HOT update: Postgres's own count of this
 * transaction's updates says so. Re-adding an index on `status` or dropping the fillfactor makes
 * this fail.
 */
describe.each(DIALECTS)('the messages read model on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await ensureProjectionTables(db.kysely, [messages]);
  });
  afterAll(async () => {
    await cleanup();
  });

  it('updates a row in place when a later event of its message arrives (HOT: no index touched)', async () => {
    const [sent = {}, open = {}] = ['sent', 'open'].map((type) => sampleEvents().find((e) => e['event'] === type) ?? {});
    const cursors = [{ projection: messages, position: 0n }];
    await append(db, '1', [sent]);
    const first = await computeBatch(db, cursors, 100);
    await append(db, '1', [open]);
    const second = await computeBatch(db, [{ projection: messages, position: first?.to ?? 0n }], 100);
    const writes = [first, second].map((b) => {
      if (b === null) throw new Error('no batch');
      const { statement, params } = writeQuery([...b.deltas.values()], '', null);
      return CompiledQuery.raw(statement.text, params);
    });
    const seen = await db.kysely.connection().execute(async (conn) => {
      await sql`BEGIN`.execute(conn);
      try {
        for (const w of writes) await conn.executeQuery(w);
        const counts = await sql<{ updated: string; hot: string }>`
          SELECT pg_stat_get_xact_tuples_updated('messages'::regclass)::text AS updated,
                 pg_stat_get_xact_tuples_hot_updated('messages'::regclass)::text AS hot`.execute(conn);
        const status = await sql<{ status: string }>`SELECT status FROM messages`.execute(conn);
        return { ...counts.rows[0], status: status.rows.map((r) => r.status) };
      } finally {
        await sql`ROLLBACK`.execute(conn);
      }
    });
    expect(seen).toEqual({ updated: '1', hot: '1', status: ['opened'] });
  });

  it('is made with pages kept a fifth free and no index on its status', async () => {
    expect(await storage(db)).toEqual({ reloptions: ['fillfactor=80'], statusIndexes: [] });
  });

  it('is brought in line by migration 0005 when made before it, and put back going down', async () => {
    const kysely = db.kysely as unknown as Kysely<unknown>;
    await sql`CREATE INDEX messages__api_key_id_status_idx ON messages (api_key_id, status)`.execute(db.kysely);
    await sql`ALTER TABLE messages RESET (fillfactor)`.execute(db.kysely);
    await migrationUp(kysely);
    expect(await storage(db)).toEqual({ reloptions: ['fillfactor=80'], statusIndexes: [] });
    await migrationDown(kysely);
    expect(await storage(db)).toEqual({ reloptions: null, statusIndexes: ['messages__api_key_id_status_idx'] });
    await migrationUp(kysely);
  });
});

async function storage(db: Db): Promise<{ reloptions: string[] | null; statusIndexes: string[] }> {
  const table = await sql<{ reloptions: string[] | null }>`SELECT reloptions FROM pg_class WHERE relname = 'messages'`.execute(db.kysely);
  const indexes = await sql<{ indexname: string }>`SELECT indexname FROM pg_indexes WHERE tablename = 'messages' AND indexdef ~ '\\mstatus\\M'`.execute(db.kysely);
  return { reloptions: table.rows[0]?.reloptions ?? null, statusIndexes: indexes.rows.map((r) => r.indexname) };
}
