import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { readBatch, readEventsAfter, readGroupHistory } from '../../src/projector/read-batch.js';
import { run, statement } from '../../src/projector/statements.js';
import { sampleEvents } from '../support/events.js';
import { append } from '../support/projections.js';
import { createTestDatabase } from '../support/services.js';

/**
 * The projector's reads of the log keep no plan on their connection: a plan made while the log
 * was nearly empty (a new database) would scan the whole log on every later call, however
 * large it grew (statements.ts, `planEachTime`). Its other statements stay prepared.
 */
describe('the projector reads the log with plans made for each call', () => {
  let db: Db;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    // One connection: what it holds prepared is what the reads left there.
    db = await connectDb({ kind: 'postgres', url: database.url, poolSize: 1 });
    await migrateToLatest(db.kysely);
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  it('leaves no prepared statement reading the events, while its others are kept', async () => {
    await append(db, '1', sampleEvents('100'));
    const keys = [
      { kind: 'message' as const, apiKeyId: '1', id: '100' },
      { kind: 'campaign' as const, apiKeyId: '1', id: '0' },
    ];
    // More calls than Postgres makes before it settles on one plan for all parameters.
    for (let i = 0; i < 8; i++) {
      await readEventsAfter(db, 0n, 100);
      await readGroupHistory(db, keys, 1000n);
      await readBatch(db, 0n, 100);
    }
    await append(db, '1', Array.from({ length: 300 }, (_, i) => sampleEvents(String(1000 + i))).flat());
    expect((await readEventsAfter(db, 0n, 5000)).length).toBeGreaterThan(300);
    expect([...(await readGroupHistory(db, keys, 1_000_000n)).values()].flat().length).toBeGreaterThan(0);

    const control = statement('SELECT 1 AS one');
    await run(db, control, []);
    const { rows } = await sql<{ name: string; statement: string }>`SELECT name, statement FROM pg_prepared_statements`.execute(db.kysely);
    expect(rows.map((r) => r.name)).toContain(control.name);
    expect(rows.filter((r) => /\bFROM events\b/.test(r.statement))).toEqual([]);
  });
});
