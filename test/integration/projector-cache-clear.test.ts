import type { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { ensureProjectionCheckpoints, readCheckpoint } from '../../src/log/checkpoints.js';
import type { Cursor } from '../../src/projector/batch.js';
import { computeCachedBatch } from '../../src/projector/cached-batch.js';
import { GroupCache } from '../../src/projector/group-cache.js';
import { writeDeltas } from '../../src/projector/write-delta.js';
import { DIALECTS, readModelDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, NO_DIFFERENCES, verifyAgainstReplay } from '../support/projections.js';

/**
 * The runner clears its group cache whenever it wins or loses a lease, and its lease timer runs
 * beside the batch loop: a clear can land while a batch is reading the log. A batch must fold
 * with the cache as it found it at its start, or a group it found there would be folded as if
 * it had no earlier events (its earlier contribution not taken back, its facts made from the
 * batch's events alone).
 */
describe.each(DIALECTS)('a group cache cleared while a batch reads the log, on %s', (dialect) => {
  const dbOf = readModelDb(dialect);

  it('changes nothing in the batch: the tables end equal to a replay', async () => {
    const db = dbOf();
    await ensureProjectionCheckpoints(db.kysely, PROJECTIONS.map((p) => p.name));
    const ofType = (messageId: string, time: number, ...types: string[]) => sampleEvents(messageId, time).filter((e) => types.includes(String(e['event'])));
    const cache = new GroupCache(1000);
    // Batch 1: messages 701 and 702 sent; their groups go into the cache.
    await append(db, '1', [...ofType('701', 1_433_333_949, 'queued', 'sent'), ...ofType('702', 1_433_334_949, 'sent')]);
    await foldAndWrite(db, cache);
    expect(cache.size).toBe(2);
    // Batch 2: a click of 701 (in the cache) and a new message 703 (not: its history is read,
    // and the cache is cleared as that read starts).
    await append(db, '1', [...ofType('701', 1_433_333_949, 'click'), ...ofType('703', 1_433_335_949, 'sent')]);
    let clears = 0;
    const clearing = onQuery(db, (text) => {
      if (text.includes('AS g(m_api_key_id')) {
        cache.clear();
        clears += 1;
      }
    });
    await foldAndWrite(clearing, cache);
    expect(clears).toBe(1);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});

/** One cached batch of every projection from its checkpoint, written as the runner writes it; its groups then go into the cache. */
async function foldAndWrite(db: Db, cache: GroupCache): Promise<void> {
  const cursors: Cursor[] = [];
  for (const projection of PROJECTIONS) cursors.push({ projection, position: await readCheckpoint(db.kysely, projection.name) });
  const generation = cache.generation;
  const batch = await computeCachedBatch(db, cursors, 1000, cache);
  if (batch === null) throw new Error('no batch');
  const moves = cursors.map((c) => ({ name: c.projection.name, expected: c.position, version: c.projection.version }));
  expect(await writeDeltas(db, [...batch.deltas.values()], '', { moves, to: batch.to })).toBe(true);
  if (cache.generation === generation) cache.putAll(batch.entries);
}

/** `db`, calling `hook` with the text of each statement as it is sent. */
function onQuery(db: Db, hook: (text: string) => void): Db {
  const wrap = <T extends object>(target: T, method: string, textOf: (arg: unknown) => string): T =>
    new Proxy(target, {
      get(t, key) {
        const value: unknown = Reflect.get(t, key, t);
        if (typeof value !== 'function') return value;
        if (key !== method) return value.bind(t);
        return (...args: unknown[]) => {
          hook(textOf(args[0]));
          return value.apply(t, args);
        };
      },
    });
  return {
    ...db,
    pool: db.pool === null ? null : wrap(db.pool, 'query', (q) => (typeof q === 'string' ? q : String((q as { text?: unknown }).text))),
    kysely: wrap(db.kysely, 'executeQuery', (q) => (q as CompiledQuery).sql),
  };
}
