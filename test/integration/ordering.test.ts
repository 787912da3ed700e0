import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { readEventsAfter } from '../../src/log/read.js';
import { openMigratedDb } from '../support/databases.js';

/**
 * DESIGN.md invariant 1: a reader tailing the log by position never skips a row, even while
 * many transactions append at once and commit in a different order than they started. The
 * appenders here use plain SQL, not the app's append function: the guarantee lives in the
 * database (the statement trigger's advisory lock).
 */

const APPENDERS = 8;
const TXS_PER_APPENDER = 25;

async function appendConcurrently(url: string, label: string): Promise<number> {
  const clients = await Promise.all(
    Array.from({ length: APPENDERS }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  let written = 0;
  await Promise.all(
    clients.map(async (c, a) => {
      for (let t = 0; t < TXS_PER_APPENDER; t++) {
        const n = 1 + ((a + t) % 5);
        await c.query('BEGIN');
        await c.query(
          `INSERT INTO events (event_id, api_key_id, type, event_time, payload)
           SELECT $1 || '-' || i, 1, 'open', 0, '{}'::jsonb FROM generate_series(1, $2::int) AS i`,
          [`${label}-${a}-${t}`, n],
        );
        // Hold the transaction open a random while so commits land out of start order.
        await c.query('SELECT pg_sleep($1)', [Math.random() * 0.01]);
        await c.query('COMMIT');
        written += n;
      }
    }),
  );
  await Promise.all(clients.map((c) => c.end()));
  return written;
}

/** Tails the log while `writers` run; returns every position seen, in the order seen. */
async function tail(db: Db, writers: Promise<number>, from: bigint): Promise<{ seen: bigint[]; written: number }> {
  const seen: bigint[] = [];
  let last = from;
  let done = false;
  let written = 0;
  void writers.then((n) => {
    written = n;
    done = true;
  });
  for (;;) {
    const finished = done;
    const batch = await readEventsAfter(db.kysely, last, 7);
    for (const row of batch) seen.push(row.position);
    if (batch.length > 0) last = batch.at(-1)?.position ?? last;
    else if (finished) return { seen, written };
    else await new Promise((r) => setTimeout(r, 1));
  }
}

describe('log ordering under concurrent appends (real Postgres)', () => {
  let db: Db;
  let url: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
    const pool = db.pool as pg.Pool;
    url = (pool.options as { connectionString: string }).connectionString;
  });
  afterAll(async () => cleanup());

  it('a tailing reader sees every committed row exactly once, in position order', async () => {
    const { seen, written } = await tail(db, appendConcurrently(url, 'locked'), 0n);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual([...seen].sort((a, b) => (a < b ? -1 : 1)));
    const all = await db.kysely.selectFrom('events').select('position').orderBy('position').execute();
    expect(all).toHaveLength(written);
    expect(seen).toEqual(all.map((r) => r.position));
  });

  it('the same reader does skip rows once the lock is gone (so the test above can fail)', async () => {
    await sql`DROP TRIGGER events_serialize_appends ON events`.execute(db.kysely);
    try {
      let skipped = 0;
      for (let round = 0; round < 5 && skipped === 0; round++) {
        const head = (await db.kysely.selectFrom('events').select((eb) => eb.fn.max('position').as('p')).executeTakeFirstOrThrow()).p ?? 0n;
        const { seen } = await tail(db, appendConcurrently(url, `unlocked${round}`), BigInt(head));
        const all = await db.kysely.selectFrom('events').select('position').where('position', '>', BigInt(head)).execute();
        skipped = all.length - new Set(seen).size;
      }
      expect(skipped).toBeGreaterThan(0);
    } finally {
      await sql`CREATE TRIGGER events_serialize_appends BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION events_serialize_appends()`.execute(
        db.kysely,
      );
    }
  });
});
