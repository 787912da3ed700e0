import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, bigints, col } from '../../projections/kit/columns.js';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { ensureProjectionCheckpoints } from '../../src/log/checkpoints.js';
import { Delta } from '../../src/projector/contribution.js';
import { arrayLiteral } from '../../src/projector/sql-arrays.js';
import { run, statement } from '../../src/projector/statements.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { writeDeltas, writeQuery } from '../../src/projector/write-delta.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { tableRows } from '../support/projections.js';

/** A counter table and a row table, written the way the projector writes a batch. */
const probe: Projection = {
  name: 'probe-writes',
  version: 1,
  groups: ['message'],
  tables: [
    { kind: 'counters', name: 'probe_counts', keys: [API_KEY, col('label', 'text')], sums: bigints('n', 'm'), maxes: [col('top', 'bigint', true)] },
    { kind: 'rows', name: 'probe_rows', keys: [API_KEY, col('message_id', 'numeric')], columns: [col('note', 'text', true), col('flag', 'boolean')] },
  ],
  project: () => {},
};

function delta(counters: [string, number[], (number | null)[]][], upserts: [string, string | null, boolean][] = [], deletes: string[] = []): Delta {
  const d = new Delta(probe);
  const c = d.counters.get('probe_counts');
  for (const [label, sums, maxes] of counters) c?.set(`1:${label}`, { keys: ['1', label], sums, maxes, mins: [] });
  const u = d.upserts.get('probe_rows');
  for (const [id, note, flag] of upserts) u?.set(`1:${id}`, { keys: ['1', id], columns: [note, flag] });
  const x = d.deletes.get('probe_rows');
  for (const id of deletes) x?.set(`1:${id}`, ['1', id]);
  return d;
}

describe.each(DIALECTS)('projector writes on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await ensureProjectionTables(db.kysely, [probe]);
    await ensureProjectionCheckpoints(db.kysely, [probe.name]);
  });
  afterAll(async () => {
    await cleanup();
  });

  it('passes values through array parameters unchanged', async () => {
    const texts = ['', 'NULL', 'a,b', '{x}', 'say "hi"', 'back\\slash', 'tab\tand\nnewline', 'ünïcødé ✉', ' padded '];
    const echo = statement('SELECT unnest($1::text::text[]) AS t, unnest($2::text::numeric(20,0)[])::text AS n, unnest($3::text::boolean[]) AS b');
    const numbers = ['18446744073709551615', '0', null, '9007199254740993', '1', '2', '3', '4', '5'];
    const flags = [true, false, null, true, false, true, false, true, false];
    const rows = await run<{ t: string | null; n: string | null; b: boolean | null }>(db, echo, [
      arrayLiteral('text', [...texts.slice(0, 8), null]),
      arrayLiteral('numeric', numbers),
      arrayLiteral('boolean', flags),
    ]);
    expect(rows.map((r) => r.t)).toEqual([...texts.slice(0, 8), null]);
    expect(rows.map((r) => r.n)).toEqual(numbers);
    expect(rows.map((r) => r.b)).toEqual(flags);
    expect(() => arrayLiteral('bigint', ['1; DROP TABLE events'])).toThrow(/not an integer/);
  });

  it('writes a batch and moves its checkpoint in one statement, or nothing when the checkpoint moved', async () => {
    const moved = await writeDeltas(db, [delta([['a', [2, 1], [5]]], [['100', 'first', true]])], '', { moves: [{ name: probe.name, expected: 0n, version: probe.version }], to: 10n });
    expect(moved).toBe(true);
    // A second runner's batch, computed from position 0 too, must not apply.
    const late = await writeDeltas(db, [delta([['a', [7, 7], [9]]], [['101', 'late', false]])], '', { moves: [{ name: probe.name, expected: 0n, version: probe.version }], to: 12n });
    expect(late).toBe(false);
    expect(await tableRows(db, 'probe_counts')).toEqual([{ api_key_id: '1', label: 'a', n: '2', m: '1', top: '5' }]);
    expect(await tableRows(db, 'probe_rows')).toEqual([{ api_key_id: '1', message_id: '100', note: 'first', flag: true }]);
    const cp = await db.kysely.selectFrom('checkpoints').select('position').where('name', '=', probe.name).executeTakeFirstOrThrow();
    expect(cp.position).toBe(10n);
  });

  it("writes nothing when the read models record another version of the projection's code", async () => {
    await sql`UPDATE checkpoints SET position = 15 WHERE name = ${probe.name}`.execute(db.kysely);
    const before = [await tableRows(db, 'probe_counts'), await tableRows(db, 'probe_rows')];
    // A batch folded by an older (or newer) version of the code, from where the checkpoint is.
    const other = await writeDeltas(db, [delta([['z', [1, 1], [1]]], [['199', 'other', true]])], '', { moves: [{ name: probe.name, expected: 15n, version: probe.version + 1 }], to: 16n });
    expect(other).toBe(false);
    expect([await tableRows(db, 'probe_counts'), await tableRows(db, 'probe_rows')]).toEqual(before);
    const cp = await db.kysely.selectFrom('checkpoints').select(['position', 'version']).where('name', '=', probe.name).executeTakeFirstOrThrow();
    expect(cp).toEqual({ position: 15n, version: probe.version });
  });

  it('adds to counters, deletes the rows a retraction empties, replaces and deletes rows', async () => {
    await sql`UPDATE checkpoints SET position = 20 WHERE name = ${probe.name}`.execute(db.kysely);
    await writeDeltas(db, [delta([['b', [1, 0], [3]]], [['102', null, false]])], '', { moves: [{ name: probe.name, expected: 20n, version: probe.version }], to: 21n });
    const ok = await writeDeltas(
      db,
      [
        delta(
          [
            ['a', [-2, -1], [4]], // back to zero: gone
            ['b', [2, -0], [2]], // adds; the max stays 3
            ['c', [0, 1], [null]],
          ],
          [['100', 'second', false]],
          ['102'],
        ),
      ],
      '',
      { moves: [{ name: probe.name, expected: 21n, version: probe.version }], to: 22n },
    );
    expect(ok).toBe(true);
    expect(await tableRows(db, 'probe_counts')).toEqual([
      { api_key_id: '1', label: 'b', n: '3', m: '0', top: '3' },
      { api_key_id: '1', label: 'c', n: '0', m: '1', top: null },
    ]);
    expect(await tableRows(db, 'probe_rows')).toEqual([{ api_key_id: '1', message_id: '100', note: 'second', flag: false }]);
  });

  it('commits a write that moves checkpoints without waiting for the disk, for its own transaction only', async () => {
    await sql`UPDATE checkpoints SET position = 30 WHERE name = ${probe.name}`.execute(db.kysely);
    const { statement: live, params } = writeQuery([delta([['d', [1, 1], [1]]])], '', { moves: [{ name: probe.name, expected: 30n, version: probe.version }], to: 31n });
    // One connection throughout: the setting must end with the write's transaction, or the
    // appends that run on this connection next would not wait for the disk either.
    const seen = await db.kysely.connection().execute(async (conn) => {
      // Whatever the server's default, this connection starts waiting for the disk.
      await sql`SET synchronous_commit = on`.execute(conn);
      try {
        const { rows } = await conn.executeQuery<{ ok: boolean; commit_mode: string }>(CompiledQuery.raw(live.text, params));
        const after = await sql<{ synchronous_commit: string }>`SHOW synchronous_commit`.execute(conn);
        return { row: rows[0], after: after.rows[0]?.synchronous_commit };
      } finally {
        await sql`RESET synchronous_commit`.execute(conn);
      }
    });
    expect(seen.row).toEqual({ ok: true, commit_mode: 'off' });
    expect(seen.after).toBe('on');
    // A rebuild's shadow writes move no checkpoint and keep the default.
    expect(writeQuery([delta([['d', [1, 1], [1]]])], '_shadow', null).statement.text).not.toMatch(/synchronous_commit/);
  });
});
