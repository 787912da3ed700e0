import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db } from '../../src/db/connect.js';
import { type LogEventRow, decodeEventBytes, decodeEventText } from '../../src/events/decode.js';
import { appendPath, appendSplitting, ONE_STATEMENT_MAX_ROWS, writeBatch } from '../../src/ingest/batch-writer.js';
import { appendEvents, appendInOneStatement } from '../../src/log/append.js';
import { copyAppend } from '../../src/log/copy-append.js';
import { writeDeadLetters } from '../../src/log/dead-letters.js';
import { openMigratedDb } from '../support/databases.js';

/**
 * The two append paths on real Postgres: COPY through a staging table (large batches, and any
 * batch with dead letters) and one statement (small batches), each with its race against a
 * concurrent writer; and which batches take which path.
 */

function rows(ids: string[], extra = ''): LogEventRow[] {
  return ids.map((id) => {
    const r = decodeEventText(`{"event":"open","time":1,"MessageID":19421777835146490,"email":"a@b.co","EventID":"${id}"${extra}}`, { apiKeyId: '1' });
    if (!r.ok) throw new Error(r.reason);
    return r.row;
  });
}

/** A migrated Postgres database for the enclosing describe block. */
function migratedPostgres(): () => Db {
  let db: Db | undefined;
  let cleanup: () => Promise<void> = async () => {};
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
  });
  afterAll(async () => cleanup());
  return () => {
    if (db === undefined) throw new Error('the database is not open yet');
    return db;
  };
}

const PATHS = [
  { name: 'copyAppend', append: (db: Db, batch: readonly LogEventRow[]) => copyAppend({ ...db, pool: db.pool as pg.Pool }, batch, []) },
  { name: 'appendInOneStatement', append: (db: Db, batch: readonly LogEventRow[]) => appendInOneStatement(db.pool as pg.Pool, batch) },
] as const;

describe.each(PATHS)('$name', ({ append: appendTo }) => {
  const database = migratedPostgres();
  const append = (batch: readonly LogEventRow[]) => appendTo(database(), batch);
  const pool = () => database().pool as pg.Pool;
  const stored = async () => (await pool().query<{ event_id: string }>('SELECT event_id FROM events ORDER BY position')).rows.map((r) => r.event_id);

  it('stores new rows in order, skips stored ones and repeats within the batch, and keeps text and 64-bit numbers exact', async () => {
    const tricky = ',"agent":"tab\\there\\nnew line \\\\ back\\\\slash","Payload":"\\\\N"';
    expect(await append(rows(['a', 'b'], tricky))).toBe(2);
    expect(await append(rows(['b', 'c', 'c', 'd']))).toBe(2);
    expect(await stored()).toEqual(['a', 'b', 'c', 'd']);
    const row = await pool().query<{ p: { agent: string; Payload: string }; m: string; t: string }>("SELECT payload AS p, message_id::text AS m, payload->>'MessageID' AS t FROM events WHERE event_id = 'a'");
    expect(row.rows[0]?.p.agent).toBe('tab\there\nnew line \\ back\\slash');
    expect(row.rows[0]?.p.Payload).toBe('\\N');
    expect(row.rows[0]?.m).toBe('19421777835146490');
    expect(row.rows[0]?.t).toBe('19421777835146490');
  });

  it('waits for a concurrent writer, then skips the row it committed and stores the rest once', async () => {
    const other = new pg.Client({ connectionString: (pool().options as { connectionString: string }).connectionString });
    await other.connect();
    try {
      await other.query('BEGIN');
      // Holds the append lock and an uncommitted 'race' row that the append cannot see yet.
      await other.query(`INSERT INTO events (event_id, api_key_id, type, event_time, payload) VALUES ('race', 1, 'open', 1, '{}')`);
      let done = false;
      const pending = append(rows(['e', 'race', 'f'])).finally(() => (done = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(done).toBe(false); // blocked on the append lock the other writer holds
      await other.query('COMMIT');
      expect(await pending).toBe(2);
    } finally {
      await other.end();
    }
    expect(await stored()).toEqual(['a', 'b', 'c', 'd', 'race', 'e', 'f']);
  });

  it('stores nothing of a batch the database refuses: the next batches on the same connections store only their own rows', async () => {
    const bad = rows(['g', 'h']);
    (bad[1] as LogEventRow).payload = '{"not json';
    await expect(append(bad)).rejects.toThrow(/json/i);
    // Every pooled connection takes a turn, so whichever one had 'g' in hand is used again.
    for (const id of ['i', 'j', 'k', 'l']) expect(await append(rows([id]))).toBe(1);
    expect(await stored()).toEqual(['a', 'b', 'c', 'd', 'race', 'e', 'f', 'i', 'j', 'k', 'l']);
  });

  it('stores each key once when batches that share keys are appended at the same time', async () => {
    const before = (await stored()).length;
    // Eight batches on eight connections, each overlapping its neighbours (and the rows stored above).
    const batches = Array.from({ length: 8 }, (_, b) => rows([...Array.from({ length: 40 }, (_, i) => `p${b * 20 + i}`), 'a', 'k']));
    const counts = await Promise.all(batches.map((batch) => append(batch)));
    const ids = await stored();
    expect(ids.length).toBe(before + 180);
    expect(new Set(ids).size).toBe(ids.length);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(180);
  });

  it('stores a NATS body as sent, copied from its bytes or escaped from its text', async () => {
    const bodies = {
      plain: '{"event":"open","time":1,"MessageID":18446744073709551615,"email":"é@b.co","EventID":"u1","agent":"Zürich ✓ 😀","Payload":"{}"}',
      escaped: '{"event":"open","time":1,"MessageID":7,"email":"a@b.co","EventID":"u2","agent":"tab\\there \\\\ \\"q\\"","Payload":"\\\\N"}',
    };
    const decoded = Object.values(bodies).map((text) => {
      const r = decodeEventBytes(new TextEncoder().encode(text), { apiKeyId: '1' });
      if (!r.ok) throw new Error(r.reason);
      return r.row;
    });
    expect(decoded.map((r) => r.payloadUtf8 !== undefined)).toEqual([true, true]);
    expect(await append(decoded)).toBe(2);
    const got = await pool().query<{ event_id: string; p: string; email: string; m: string }>(
      "SELECT event_id, payload::text AS p, email, payload->>'MessageID' AS m FROM events WHERE event_id IN ('u1', 'u2') ORDER BY event_id",
    );
    expect(got.rows.map((r) => JSON.parse(r.p))).toEqual(Object.values(bodies).map((t) => JSON.parse(t)));
    expect(got.rows.map((r) => r.m)).toEqual(['18446744073709551615', '7']);
    expect(got.rows[0]?.email).toBe('é@b.co');
  });
});

describe('copyAppend with dead letters', () => {
  const db = migratedPostgres();
  const pool = () => db().pool as pg.Pool;
  const letters = async () => ((await pool().query('SELECT count(*)::int AS n FROM dead_letters')).rows[0] as { n: number }).n;

  it('commits the rows and the dead letters together', async () => {
    expect(await copyAppend({ ...db(), pool: pool() }, rows(['a', 'b']), [{ source: 'nats', reason: 'bad', raw: Buffer.from('x'), message_key: 'k1' }])).toBe(2);
    expect(await letters()).toBe(1);
  });

  it('writes dead letters alone, without touching the log', async () => {
    expect(await copyAppend({ ...db(), pool: pool() }, [], [{ source: 'nats', reason: 'bad', raw: Buffer.from('y'), message_key: 'k2' }])).toBe(0);
    expect(await letters()).toBe(2);
    expect((await pool().query('SELECT count(*)::int AS n FROM events')).rows[0]).toEqual({ n: 2 });
  });

  it('writes more dead letters than one statement could bind (65,535 parameters), with the rows, on both writers', async () => {
    const many = (prefix: string) =>
      Array.from({ length: 12_000 }, (_, i) => ({ source: 'nats' as const, subject: 'mail.events.1.open', api_key_id: '1', nats_seq: String(i + 1), reason: 'bad', raw: Buffer.from(`x${i}`), message_key: `${prefix}-${i}` }));
    expect(await copyAppend({ ...db(), pool: pool() }, rows(['c']), many('copy'))).toBe(1);
    await writeDeadLetters(db().kysely, many('alone'));
    expect(await letters()).toBe(2 + 24_000);
  });
});

describe('which path a batch takes', () => {
  it('sends small batches without dead letters as one statement, everything else by COPY', () => {
    expect(appendPath(1, 0)).toBe('one statement');
    expect(appendPath(ONE_STATEMENT_MAX_ROWS, 0)).toBe('one statement');
    expect(appendPath(ONE_STATEMENT_MAX_ROWS + 1, 0)).toBe('copy');
    expect(appendPath(5, 1)).toBe('copy');
    expect(appendPath(0, 1)).toBe('copy');
  });

  describe('writeBatch on Postgres', () => {
    let single: Db;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      const opened = await openMigratedDb('postgres');
      cleanup = opened.cleanup;
      // One connection, so the session state each path leaves behind can be looked at.
      const url = ((opened.db.pool as pg.Pool).options as { connectionString: string }).connectionString;
      single = await connectDb({ kind: 'postgres', url, poolSize: 1 });
    });
    afterAll(async () => {
      await single.close();
      await cleanup();
    });

    const session = async () => {
      const pool = single.pool as pg.Pool;
      const prepared = await pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements');
      const staging = await pool.query<{ t: string | null }>("SELECT to_regclass('pg_temp.mailtally_append_staging')::text AS t");
      return { oneStatement: prepared.rows.some((r) => r.name === 'mailtally-append-one-statement'), staging: staging.rows[0]?.t != null };
    };
    const letterFor = (i: number, reason: string) => ({ source: 'nats' as const, reason, raw: Buffer.from(String(i)), message_key: `k${i}` });

    it('appends a small batch in one statement, with no staging table, and a larger one by COPY', async () => {
      const small = rows(Array.from({ length: ONE_STATEMENT_MAX_ROWS }, (_, i) => `s${i}`));
      expect(await writeBatch(single, small, [], letterFor)).toEqual({ inserted: ONE_STATEMENT_MAX_ROWS, refused: new Map() });
      expect(await session()).toEqual({ oneStatement: true, staging: false });
      const large = rows(Array.from({ length: ONE_STATEMENT_MAX_ROWS + 1 }, (_, i) => `l${i}`));
      expect(await writeBatch(single, large, [], letterFor)).toEqual({ inserted: ONE_STATEMENT_MAX_ROWS + 1, refused: new Map() });
      expect((await session()).staging).toBe(true);
    });

    it('dead-letters only the rows the database refuses when a small batch fails, and stores the rest', async () => {
      const batch = rows(['r1', 'r2', 'r3']);
      (batch[1] as LogEventRow).payload = '{"not json';
      const outcome = await writeBatch(single, batch, [], letterFor);
      expect(outcome.inserted).toBe(2);
      expect([...outcome.refused.keys()]).toEqual([1]);
      expect(outcome.refused.get(1)).toMatch(/refused by the database: .*json/i);
      const pool = single.pool as pg.Pool;
      expect((await pool.query("SELECT count(*)::int AS n FROM dead_letters WHERE message_key = 'k1'")).rows[0]).toEqual({ n: 1 });
    });

    it('finds a few refused rows in a large batch by halving it, not row by row, and stores the rest', async () => {
      const batch = rows(Array.from({ length: 2000 }, (_, i) => `split-${i}`));
      const bad = [7, 1234, 1999];
      for (const i of bad) (batch[i] as LogEventRow).payload = '{"not json';
      let statements = 0;
      const outcome = await appendSplitting(batch, async (part) => {
        statements += 1;
        return (await appendEvents(single.kysely, part)).inserted.size;
      });
      expect(outcome.inserted).toBe(1997);
      expect([...outcome.refused.keys()].sort((a, b) => a - b)).toEqual(bad);
      // About 2·k·log2(n) = 66 at most; one per row was 2,000.
      expect(statements).toBeLessThanOrEqual(66);
      const pool = single.pool as pg.Pool;
      expect((await pool.query("SELECT count(*)::int AS n FROM events WHERE event_id LIKE 'split-%'")).rows[0]).toEqual({ n: 1997 });

      // Through writeBatch (by COPY), the refused rows are dead-lettered with the database's reason.
      const again = rows(Array.from({ length: 300 }, (_, i) => `split-b-${i}`));
      (again[150] as LogEventRow).payload = '{"not json';
      const written = await writeBatch(single, again, [], letterFor);
      expect(written.inserted).toBe(299);
      expect([...written.refused.keys()]).toEqual([150]);
      expect((await pool.query("SELECT count(*)::int AS n FROM dead_letters WHERE message_key = 'k150'")).rows[0]).toEqual({ n: 1 });
    });

    it.each([
      ['a small batch', 3],
      ['a batch by COPY', ONE_STATEMENT_MAX_ROWS + 1],
    ])('throws, for a retry, when a statement times out on %s: its valid rows are not dead-lettered', async (_name, n) => {
      const pool = single.pool as pg.Pool;
      const batch = rows(Array.from({ length: n }, (_, i) => `timeout-${n}-${i}`));
      // The pool's one connection is the writer's; the lock is held from a connection of its own.
      const url = (pool.options as { connectionString: string }).connectionString;
      const other = new pg.Client({ connectionString: url });
      await other.connect();
      try {
        await other.query('BEGIN');
        await other.query('LOCK TABLE events IN SHARE MODE');
        await pool.query("SET statement_timeout = '300ms'");
        await expect(writeBatch(single, batch, [], letterFor)).rejects.toMatchObject({ code: '57014' });
      } finally {
        await other.query('ROLLBACK');
        await other.end();
        await pool.query('RESET statement_timeout');
      }
      expect((await pool.query("SELECT count(*)::int AS n FROM dead_letters WHERE reason LIKE '%statement timeout%'")).rows[0]).toEqual({ n: 0 });
      expect(await writeBatch(single, batch, [], letterFor)).toEqual({ inserted: n, refused: new Map() });
    });
  });
});
