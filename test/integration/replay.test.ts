import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { replay, type ReplayPhase, type ReplayProgress } from '../../src/projector/replay.js';
import { copyEventsByMessage } from '../../src/projector/copy-reader.js';
import { holdLeases } from '../../src/log/leases.js';
import { logHead } from '../../src/log/read.js';
import type { LogEvent } from '../../projections/kit/types.js';
import pg from 'pg';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

const PgClient = pg.Client;

const TABLE_SPECS = PROJECTIONS.flatMap((p) => p.tables);
const TABLES = TABLE_SPECS.map((t) => t.name);

/** Every index of the read-model tables (the primary keys' included), as Postgres defines it. */
async function indexDefinitions(db: Db): Promise<string[]> {
  const { rows } = await sql<{ def: string }>`
    SELECT indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ANY(${TABLES}) ORDER BY indexname`.execute(db.kysely);
  return rows.map((r) => r.def);
}

/** The read-model tables' storage options (`fillfactor`), by table. */
async function storageOptions(db: Db): Promise<string[]> {
  const { rows } = await sql<{ t: string }>`
    SELECT relname || ' ' || coalesce(array_to_string(reloptions, ','), '-') AS t FROM pg_class WHERE relkind = 'r' AND relname = ANY(${TABLES}) ORDER BY relname`.execute(db.kysely);
  return rows.map((r) => r.t);
}

async function primaryKeys(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT conname AS name FROM pg_constraint WHERE contype = 'p' AND conrelid::regclass::text = ANY(${TABLES}) ORDER BY conname`.execute(db.kysely);
  return rows.map((r) => r.name);
}

async function rowCount(db: Db): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT (${sql.raw(TABLES.map((t) => `(SELECT count(*) FROM ${t})`).join(' + '))})::int AS n`.execute(db.kysely);
  return rows[0]?.n ?? -1;
}

describe.each(DIALECTS)('replay on %s', (dialect) => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  let projector: Projector;

  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb(dialect));
    projector = await startProjector(db);
    for (let m = 0; m < 20; m++) {
      const events = sampleEvents(String(5000 + m), 1_433_333_949 + m * 977).map((e) => ({ ...e, mj_campaign_id: 7000 + (m % 3), mj_list_id: m % 2 }));
      await append(db, String(1 + (m % 2)), events);
    }
    await caughtUp(db);
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  // By default a rebuild runs each projection's set-based SQL; folded instead, on PGlite it reads
  // the log one partition of groups at a time (the partition count must not matter), on Postgres
  // it streams the log in message order and takes no partitions.
  const folds =
    dialect === 'pglite'
      ? [1, 7, 40].map((n) => ({ how: `folded in partitions of ${n} events`, partitionEvents: n, engine: 'fold' as const }))
      : [{ how: 'folded, read in message order', engine: 'fold' as const }];
  it.each([{ how: 'built by set-based SQL', engine: 'sql' as const }, ...folds])('gives the live tables, $how', async (fold) => {
    const report = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', ...fold });
    const nonEmpty = Object.entries(report.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0);
    expect(nonEmpty).toEqual([]);
    expect(report.rows).toBeGreaterThan(100);
  });

  // A live row that went wrong is counted on both sides and shown as it is on each.
  it('shows a few of the rows that differ, live and rebuilt', async () => {
    const before = await sql<{ n: string }>`SELECT count(*)::text AS n FROM geo_stats`.execute(db.kysely);
    expect(Number(before.rows[0]?.n)).toBeGreaterThan(0);
    await sql`UPDATE geo_stats SET country = 'XX' WHERE ctid = (SELECT min(ctid) FROM geo_stats WHERE country <> 'XX')`.execute(db.kysely);
    const report = await replay(db, PROJECTIONS.filter((p) => p.name === 'geo'), { readBatch: 13, catchUpBatch: 100, mode: 'verify' });
    const geo = report.differences?.['geo_stats'];
    expect(geo).toMatchObject({ onlyLive: 1, onlyRebuilt: 1 });
    expect(geo?.samples?.live.map((r) => r['country'])).toEqual(['XX']);
    expect(geo?.samples?.rebuilt).toHaveLength(1);
    expect(geo?.samples?.rebuilt[0]?.['country']).not.toBe('XX');
    // The verify run left the live table as it was: put the row back with a real rebuild.
    await replay(db, PROJECTIONS.filter((p) => p.name === 'geo'), { readBatch: 13, catchUpBatch: 100 });
  });

  // On Postgres the counter totals spill to the database past a bound; spilled or not, the same tables.
  if (dialect === 'postgres') it('gives the live tables when its counter totals spill to the database, and leaves no spill behind', async () => {
    const spilled = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', counterEntries: 25, engine: 'fold' });
    expect(spilled.spills).toBeGreaterThan(5);
    expect(Object.entries(spilled.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0)).toEqual([]);
    const unspilled = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', engine: 'fold' });
    expect(unspilled.spills).toBe(0);
    expect(unspilled.rows).toBe(spilled.rows);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE '%\_\_spill'`.execute(db.kysely);
    expect(rows[0]?.n).toBe(0);
  });

  // A projection without set-based SQL (one being written, say) is folded within the same
  // rebuild as the others' SQL runs.
  it('folds the projections that have no SQL, beside those built by theirs', async () => {
    const withoutSql = PROJECTIONS.map((p) => {
      if (p.name !== 'geo' && p.name !== 'messages') return p;
      const { sql: _unused, ...folded } = p;
      return folded;
    });
    const report = await replay(db, withoutSql, { readBatch: 13, catchUpBatch: 100, mode: 'verify' });
    expect(Object.entries(report.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0)).toEqual([]);
    expect(report.rows).toBeGreaterThan(100);
  });

  // Projections whose SQL reads only the message facts (and the log) need no `engagement`.
  it('rebuilds a subset of the projections, none of which reads the engagement events', async () => {
    const subset = PROJECTIONS.filter((p) => ['campaign-overview', 'contact-statistics', 'recipient-esp'].includes(p.name));
    const report = await replay(db, subset, { readBatch: 13, catchUpBatch: 100, mode: 'verify' });
    expect(Object.keys(report.differences ?? {})).toEqual(['campaign_stats', 'campaigns', 'contact_stats', 'recipient_esp_stats']);
    expect(Object.values(report.differences ?? {}).filter((d) => d.onlyLive !== 0 || d.onlyRebuilt !== 0)).toEqual([]);
  });

  // The set-based rebuild's per-message facts live in an unlogged table of the run: dropped at
  // the end, and one an interrupted run left (no live lease of its run) dropped by the next run.
  it('leaves no facts table behind, and drops one an interrupted run left', async () => {
    await sql.raw('CREATE UNLOGGED TABLE replay_facts_0123456789ab (n int)').execute(db.kysely);
    await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify' });
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE 'replay\_facts\_%'`.execute(db.kysely);
    expect(rows[0]?.n).toBe(0);
  });

  // A run killed (or quit at a second Ctrl-C) leaves its work tables; a later run of other
  // projections drops them, unless a replay of theirs is running.
  it('drops the work tables a killed run of other projections left, not those of a running one', async () => {
    await sql.raw('CREATE TABLE statcounters__shadow (n int)').execute(db.kysely);
    await sql.raw('CREATE UNLOGGED TABLE statcounters__spill (n int)').execute(db.kysely);
    await sql.raw('CREATE TABLE geo_stats__shadow (n int)').execute(db.kysely);
    const running = await holdLeases(db.kysely, ['replay:geo'], 'another-replay', 60_000);
    if (!running.ok) throw new Error('lease not taken');
    try {
      const subset = PROJECTIONS.filter((p) => p.name === 'recipient-esp');
      await replay(db, subset, { readBatch: 13, catchUpBatch: 100 });
      const { rows } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relkind = 'r' AND (relname LIKE '%\_\_shadow' OR relname LIKE '%\_\_spill') ORDER BY 1`.execute(db.kysely);
      expect(rows.map((r) => r.name)).toEqual(['geo_stats__shadow']);
    } finally {
      await running.release();
      await sql.raw('DROP TABLE IF EXISTS geo_stats__shadow').execute(db.kysely);
    }
  });

  // A run whose lease lapsed while its statements ran (its connections busy) still holds its tables: they stay.
  if (dialect === 'postgres') it('keeps a left work table that a statement still holds, lease free or not', async () => {
    await sql.raw('CREATE TABLE statcounters__shadow (n int)').execute(db.kysely);
    const other = new PgClient({ connectionString: url as string });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('LOCK TABLE statcounters__shadow IN ACCESS SHARE MODE');
      await replay(db, PROJECTIONS.filter((p) => p.name === 'recipient-esp'), { readBatch: 13, catchUpBatch: 100 });
      const { rows } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relname = 'statcounters__shadow'`.execute(db.kysely);
      expect(rows).toHaveLength(1);
      await other.query('COMMIT');
      await replay(db, PROJECTIONS.filter((p) => p.name === 'recipient-esp'), { readBatch: 13, catchUpBatch: 100 });
      const after = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relname = 'statcounters__shadow'`.execute(db.kysely);
      expect(after.rows).toHaveLength(0);
    } finally {
      await other.end();
      await sql.raw('DROP TABLE IF EXISTS statcounters__shadow').execute(db.kysely);
    }
  });

  // Ctrl-C reaches `mailtally replay` as a signal handler, which runs only when the event loop
  // gets a turn: on PGlite each statement holds the thread, so the rebuild must give it turns.
  it.each(['sql', 'fold'] as const)('stops when aborted by a timer set as it starts, live tables untouched and nothing left (%s)', async (engine) => {
    const stopping = new AbortController();
    setTimeout(() => stopping.abort(), 0);
    await expect(replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, engine, signal: stopping.signal })).rejects.toThrow(/aborted/);
    const { rows } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relkind = 'r' AND (relname LIKE '%\_\_shadow' OR relname LIKE 'replay\_%')`.execute(db.kysely);
    expect(rows).toEqual([]);
    const report = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify' });
    expect(Object.values(report.differences ?? {}).filter((d) => d.onlyLive !== 0 || d.onlyRebuilt !== 0)).toEqual([]);
  });

  // An interrupted rebuild (the CLI exits on Ctrl-C) can leave spill tables behind; the next run must not add them in.
  if (dialect === 'postgres') it('drops the spills an interrupted rebuild left before it spills again', async () => {
    await sql.raw('CREATE UNLOGGED TABLE contact_stats__spill (LIKE contact_stats)').execute(db.kysely);
    await sql.raw('INSERT INTO contact_stats__spill SELECT * FROM contact_stats').execute(db.kysely);
    const report = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', counterEntries: 25, engine: 'fold' });
    expect(report.spills).toBeGreaterThan(0);
    expect(Object.entries(report.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0)).toEqual([]);
  });

  // A rebuild builds its tables' keys and indexes its own way (set-based: every table keyed and
  // indexed after its load; folded on Postgres: row tables indexed while they load, counter tables
  // keyed and indexed after): what it swaps in must be what the live projector created, and the
  // projector must go on writing into it.
  it.each(['sql', 'fold'] as const)('swaps in tables with the live ones’ primary keys, indexes and storage options, which take the projector’s next writes (%s)', async (engine) => {
    const indexes = await indexDefinitions(db);
    const keys = await primaryKeys(db);
    const storage = await storageOptions(db);
    expect(storage).toContain('messages fillfactor=80');
    expect(keys).toHaveLength(TABLES.length);

    const report = await replay(db, PROJECTIONS, { readBatch: 50, catchUpBatch: 100, engine });
    expect(await indexDefinitions(db)).toEqual(indexes);
    expect(await primaryKeys(db)).toEqual(keys);
    expect(await storageOptions(db)).toEqual(storage);
    // Nothing came meanwhile: the rows it reports are the rows the tables hold.
    expect(report.rows).toBe(await rowCount(db));

    // New events (later times: new EventIDs) for the same messages upsert into the swapped-in rows (ON CONFLICT needs the keys).
    const before = await rowCount(db);
    for (let m = 0; m < 20; m++) {
      const events = sampleEvents(String(5000 + m), (engine === 'sql' ? 1_433_340_000 : 1_433_390_000) + m * 977).map((e) => ({ ...e, mj_campaign_id: 7000 + (m % 3) }));
      await append(db, String(1 + (m % 2)), events);
    }
    await caughtUp(db);
    expect(await rowCount(db)).toBeGreaterThan(before);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });

  // What the progress bar is given. The facts are statements that count nothing until they end;
  // the SQL's loads, keys and indexes are one phase, each counted as it ends; the catch-up counts
  // from where the rebuild ended, so its total is what was appended during the rebuild.
  it.each(['sql', 'fold'] as const)('reports each phase’s progress as it goes, the catch-up’s from where the rebuild ended (%s)', async (engine) => {
    const from = await logHead(db.kysely);
    const seen: ReplayProgress[] = [];
    let appending: Promise<void> | null = null;
    let landed = false;
    let landedFirst: boolean | null = null;
    const report = await replay(db, PROJECTIONS, {
      readBatch: 50,
      catchUpBatch: 10,
      engine,
      onProgress: (p) => {
        seen.push({ ...p });
        // Appended once the rebuild has read the head: what its catch-up applies.
        appending ??= (async () => {
          for (let m = 0; m < 20; m++) await append(db, '3', sampleEvents(String((engine === 'sql' ? 7000 : 7100) + m), 1_433_400_000 + m * 977));
          landed = true;
        })();
        if (p.phase === 'catch-up') landedFirst ??= landed;
      },
    });
    await appending;
    const appended = Number((await logHead(db.kysely)) - from);
    expect(landedFirst, 'the appends landed before the catch-up began').toBe(true);
    const phases = seen.map((p) => p.phase).filter((p, i, all) => p !== all[i - 1]);
    const of = (phase: ReplayPhase) => seen.filter((p) => p.phase === phase);

    const catchUp = of('catch-up');
    expect(catchUp[0]).toEqual({ phase: 'catch-up', done: 0, total: appended });
    expect(catchUp.every((p) => p.total === appended && p.done <= p.total)).toBe(true);
    expect(catchUp.map((p) => p.done)).toEqual([...catchUp.map((p) => p.done)].sort((a, b) => a - b));
    // Where the catch-up ended, or further: the swap brings the shadow tables at least to where the live projector is.
    expect(report.position).toBeGreaterThanOrEqual(from + BigInt(catchUp.at(-1)?.done ?? -1));
    expect(report.position).toBeLessThanOrEqual(await logHead(db.kysely));
    // Its events, the caught-up ones among them: what the swapped-in read models hold.
    const held = await db.kysely.selectFrom('events').select((eb) => eb.fn.countAll<string>().as('n')).where('position', '<=', report.position).executeTakeFirstOrThrow();
    expect(report.events).toBe(Number(held.n));
    expect(of('swap')).toEqual([{ phase: 'swap', done: 0, total: 1, gauge: 'steps' }, { phase: 'swap', done: 1, total: 1, gauge: 'steps' }]);

    if (engine === 'sql') {
      expect(phases).toEqual(['read', 'build', 'catch-up', 'swap']);
      expect(of('read')).toEqual([{ phase: 'read', done: 0, total: Number(from), gauge: 'none' }, { phase: 'read', done: Number(from), total: Number(from), gauge: 'none' }]);
      // `engagement`, then each table's load, key and indexes.
      const steps = 1 + TABLE_SPECS.reduce((n, t) => n + 2 + (t.indexes ?? []).length, 0);
      expect(of('build')).toEqual(Array.from({ length: steps + 1 }, (_, done) => ({ phase: 'build', done, total: steps, gauge: 'steps' })));
    } else {
      expect(phases.slice(0, 1)).toEqual(['read']);
      expect(of('read').every((p) => p.gauge === undefined)).toBe(true);
      expect(of('index').length).toBeGreaterThan(0);
      expect(of('index').every((p) => p.gauge === 'steps')).toBe(true);
    }
    await caughtUp(db);
  });

  // Appends that outpace the catch-up: 5 messages of 9 events while it rebuilds, then 2 for each
  // catch-up step of 5 positions. A catch-up that waited to reach the head would not end while
  // they go on. It stops once it no longer gains, swaps in there, and the live projector applies
  // the rest, so the tables end as a clean replay's.
  it('swaps in once its catch-up stops gaining on the appends, the live projector applying the rest', async () => {
    const CAP = 2000;
    let appending = true;
    let messages = 0;
    let rebuilding = false;
    let steps = 0;
    const appender = (async () => {
      // Until the replay has ended, or long after a catch-up that must have ended (a cap, so a failing run ends).
      while (appending && messages < CAP) {
        if (rebuilding && messages < 5 + 2 * steps) await append(db, '4', sampleEvents(String(60_000 + messages++), 1_433_500_000 + messages * 61));
        else await new Promise((r) => setTimeout(r, 2));
      }
    })();
    let report;
    try {
      report = await replay(db, PROJECTIONS, {
        readBatch: 50,
        catchUpBatch: 5,
        onProgress: (p) => {
          rebuilding = true;
          if (p.phase === 'catch-up' && p.done > 0) steps++;
        },
      });
    } finally {
      appending = false;
      await appender;
    }
    expect(messages, 'the replay ended while the appends went on').toBeLessThan(CAP);
    expect(report.behind).toBeGreaterThan(5);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});

describe('reading the log in message order (Postgres)', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let head: bigint;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
    // Two tenants with the same message ids, their events appended interleaved, a message at a time.
    for (let round = 0; round < 3; round++) {
      for (let m = 0; m < 6; m++) {
        const events = sampleEvents(String(9000 + m), 1_433_333_949 + round * 5000 + m).slice(round * 3, round * 3 + 3);
        await append(db, String(1 + (m % 2)), events);
        await append(db, String(2 - (m % 2)), events);
      }
    }
    head = await logHead(db.kysely);
    // Appended after the head: not read.
    await append(db, '1', sampleEvents('9999', 1_433_400_000));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('gives every event up to the head once, each message’s events in one run', async () => {
    const read: LogEvent[] = [];
    for await (const events of copyEventsByMessage(db.pool as pg.Pool, head)) read.push(...events);
    expect(read).toHaveLength(Number(head));
    expect(new Set(read.map((e) => e.position)).size).toBe(read.length);
    expect(read.every((e) => e.position <= head)).toBe(true);
    const runs = read.filter((e) => e.type !== 'campaign').map((e) => `${e.apiKeyId}:${e.messageId}`).filter((k, i, all) => k !== all[i - 1]);
    expect(runs.length).toBeGreaterThan(1);
    expect(new Set(runs).size).toBe(runs.length);
  });

  it('discards its connection when the reader stops early, so no COPY is left running', async () => {
    const pool = db.pool as pg.Pool;
    let during = -1;
    for await (const events of copyEventsByMessage(pool, head)) {
      expect(events.length).toBeGreaterThan(0);
      during = pool.totalCount;
      break;
    }
    // Not back in the pool, where the next query would find it mid-COPY.
    expect(pool.totalCount).toBe(during - 1);
    const copies = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY%'`.execute(db.kysely);
      return rows[0]?.n ?? -1;
    };
    for (let i = 0; i < 50 && (await copies()) > 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await copies()).toBe(0);
    const again: LogEvent[] = [];
    for await (const events of copyEventsByMessage(pool, head)) again.push(...events);
    expect(again).toHaveLength(Number(head));
  });
});
