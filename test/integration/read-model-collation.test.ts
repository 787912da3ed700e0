import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { replay } from '../../src/projector/replay.js';
import { allColumns, ensureProjectionTables } from '../../src/projector/tables.js';
import { DIALECTS, readModelDb } from '../support/databases.js';
import { createTestDatabase } from '../support/services.js';

/**
 * Read-model text compares by code point (`COLLATE "C"`), as the fold compares it, whatever
 * collation the database was created with: `Sort` on a text property and the order of keys are
 * the same on every server. Declaring the columns with the database's default collation again
 * makes the first test fail, and the second too on a database whose default is not byte order.
 */

/** Every text column of every read-model table, with the name of its collation. */
async function textColumnCollations(db: Db): Promise<{ column: string; collation: string }[]> {
  const wanted = PROJECTIONS.flatMap((p) => p.tables.flatMap((t) => allColumns(t).filter((c) => c.type === 'text').map((c) => `${t.name}.${c.name}`)));
  const { rows } = await sql<{ column: string; collation: string }>`
    SELECT c.relname || '.' || a.attname AS column, coalesce(co.collname, '(none)') AS collation
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_collation co ON co.oid = a.attcollation
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      AND c.relname || '.' || a.attname = ANY(${wanted})`.execute(db.kysely);
  // Sorted here, not by the database: its order of these names is the very thing under test.
  expect(rows.map((r) => r.column).sort()).toEqual([...wanted].sort());
  return rows;
}

describe.each(DIALECTS)('read-model text on %s', (dialect) => {
  const dbOf = readModelDb(dialect);

  it('is declared COLLATE "C" in every read-model table', async () => {
    const columns = await textColumnCollations(dbOf());
    expect(columns.length).toBeGreaterThan(40);
    expect(columns.filter((c) => c.collation !== 'C')).toEqual([]);
  });

  it.each(['sql', 'fold'] as const)('stays so in the tables a rebuild (%s) swaps in', async (engine) => {
    await replay(dbOf(), PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000, engine });
    expect((await textColumnCollations(dbOf())).filter((c) => c.collation !== 'C')).toEqual([]);
  });
});

describe('read-model text on a Postgres database created with a linguistic collation (ICU en-US)', () => {
  let db: Db | null = null;
  let drop: (() => Promise<void>) | null = null;
  let unsupported = '';

  beforeAll(async () => {
    try {
      const database = await createTestDatabase("TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'");
      drop = database.drop;
      db = await connectDb({ kind: 'postgres', url: database.url, poolSize: 2 });
    } catch (err) {
      // A server built without ICU cannot make such a database; the test says so instead of passing.
      unsupported = err instanceof Error ? err.message : String(err);
      return;
    }
    await migrateToLatest(db.kysely);
    await ensureProjectionTables(db.kysely, PROJECTIONS);
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  it('sorts by code point where the database default would not', async (ctx) => {
    if (db === null) return ctx.skip(`this Postgres cannot create an ICU database: ${unsupported}`);
    const names = ['apple', 'Zeta', 'Émile', 'zebra'];
    // The database's own collation puts them in dictionary order: the test can tell the two apart.
    const linguistic = await sql<{ s: string }>`SELECT s FROM unnest(${names}::text[]) AS s ORDER BY s`.execute(db.kysely);
    expect(linguistic.rows.map((r) => r.s)).toEqual(['apple', 'Émile', 'zebra', 'Zeta']);
    for (const [i, esp] of names.entries()) {
      await sql`INSERT INTO recipient_esp_stats (api_key_id, campaign_id, esp) VALUES (1, ${i + 1}, ${esp})`.execute(db.kysely);
    }
    const stored = await sql<{ esp: string }>`SELECT esp FROM recipient_esp_stats ORDER BY esp`.execute(db.kysely);
    expect(stored.rows.map((r) => r.esp)).toEqual(['Zeta', 'apple', 'zebra', 'Émile']);
  });
});
