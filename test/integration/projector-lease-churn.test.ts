import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { leaseName } from '../../src/projector/runner.js';
import { DIALECTS, readModelDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { seededRng } from '../../bench/support/generate.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * Leases won and lost while the projector works, over and over, while events of the same
 * messages keep arriving: taken from a runner for a moment, or handed from one runner to
 * another. Each loss and each win clears a runner's group cache from its lease timer, beside
 * batches being read and written for its other projections; a runner that lost a lease
 * mid-batch finds its checkpoint moved. However these interleave, the tables end equal to a
 * clean replay.
 */
describe.each(DIALECTS)('projector under lease churn on %s', (dialect) => {
  const dbOf = readModelDb(dialect);

  it('one runner, its leases taken for a moment over and over: ends equal to a replay', async () => {
    const db = dbOf();
    const random = seededRng(20_261_126);
    const projector = await startProjector(db, { leaseMs: 300, batchSize: 8, pollMs: 20 });
    let steals = 0;
    await whileChurning(
      () => appendShuffled(db, '1', random),
      async () => {
        const p = PROJECTIONS[Math.floor(random() * PROJECTIONS.length)];
        const { numAffectedRows } = await sql`
          UPDATE leases SET owner = 'intruder', expires_at = now() + interval '150 milliseconds'
          WHERE name = ${leaseName(p?.name ?? '')} AND owner <> 'intruder'`.execute(db.kysely);
        if (numAffectedRows === 1n) steals += 1;
        await pause(50 + random() * 150);
      },
    );
    try {
      await caughtUp(db, undefined, 60_000);
    } finally {
      await projector.stop();
    }
    expect(steals).toBeGreaterThan(10);
    expect(projector.stats.cacheHits).toBeGreaterThan(0);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);

  it('two runners, leases handed from one to the other over and over: ends equal to a replay', async () => {
    const db = dbOf();
    const random = seededRng(20_261_127);
    const runners = [await startProjector(db, { leaseMs: 300, batchSize: 8, pollMs: 20 }), await startProjector(db, { leaseMs: 300, batchSize: 8, pollMs: 20 })];
    let handovers = 0;
    try {
      await whileChurning(
        () => appendShuffled(db, '2', random),
        async () => {
          // A projection's lease given from its holder to the other runner, as when a holder
          // stalls past its lease: the holder finds it lost at its next renewal, maybe mid-batch.
          const name = leaseName(PROJECTIONS[Math.floor(random() * PROJECTIONS.length)]?.name ?? '');
          const row = await db.kysely.selectFrom('leases').select('owner').where('name', '=', name).executeTakeFirst();
          const to = runners.find((r) => r.owner !== row?.owner)?.owner;
          const { numAffectedRows } = await sql`
            UPDATE leases SET owner = ${to}, expires_at = now() + interval '300 milliseconds'
            WHERE name = ${name} AND owner = ${row?.owner ?? ''}`.execute(db.kysely);
          if (numAffectedRows === 1n) handovers += 1;
          await pause(30 + random() * 90);
        },
      );
      await caughtUp(db, undefined, 60_000);
    } finally {
      for (const r of runners) await r.stop();
    }
    expect(handovers).toBeGreaterThan(10);
    expect(runners.map((r) => r.stats.batches > 0)).toEqual([true, true]);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `churn` over and over until `work` is done. */
async function whileChurning(work: () => Promise<void>, churn: () => Promise<void>): Promise<void> {
  let churning = true;
  const churner = (async () => {
    while (churning) await churn();
  })();
  try {
    await work();
  } finally {
    churning = false;
    await churner;
  }
}

/**
 * 80 messages of the tenant, their events appended one at a time in shuffled order, a new
 * message every other round: most batches find some of their groups in the cache and read
 * others' history.
 */
async function appendShuffled(db: Db, tenant: string, random: () => number): Promise<void> {
  const pending = Array.from({ length: 80 }, (_, m) => sampleEvents(String(900 + m), 1_433_333_949 + m * 61).filter((e) => e['event'] !== 'campaign'));
  for (let round = 0; pending.some((events) => events.length > 0); round++) {
    const batch: Record<string, unknown>[] = [];
    for (const events of pending.slice(0, round / 2 + 1)) if (events.length > 0 && random() < 0.3) batch.push(...events.splice(Math.floor(random() * events.length), 1));
    if (batch.length > 0) await append(db, tenant, batch);
    await pause(25);
  }
}
