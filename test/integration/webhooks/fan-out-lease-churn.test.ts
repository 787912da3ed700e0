import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRng } from '../../../bench/support/generate.js';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { FAN_OUT_LEASE as LEASE } from '../../../src/webhooks/fan-out-checkpoint.js';
import { openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { dispatchersWithOwnPools, hook, outboxEmpty } from './fixture.js';

/**
 * The fan-out's lease passed back and forth between two dispatchers (each with its own pool, as
 * two processes) while events arrive, as when a holder stalls past its lease: the holder finds
 * it lost at its next renewal, maybe in the middle of a step, and the other starts from the
 * checkpoint; each loss and each win resets a fan-out's open batches and position from its
 * lease timer. Every event still reaches its Version 1 and its Version 2 URL.
 */
let db: Db;
let url: string | null;
let cleanup: () => Promise<void>;
let dispatchers: Dispatcher[] = [];
let stopDispatchers: () => Promise<void> = async () => {};
let receiver: WebhookReceiver;

beforeAll(async () => {
  ({ db, url, cleanup } = await openMigratedDb('postgres'));
  receiver = await WebhookReceiver.start(() => ({ status: 200 }));
});
afterAll(async () => {
  await stopDispatchers();
  await receiver?.close();
  await cleanup?.();
});

describe('webhook fan-out under lease churn', () => {
  it('delivers every event, to Version 1 and Version 2 URLs', async () => {
    if (url === null) throw new Error('no connection string');
    ({ dispatchers, stop: stopDispatchers } = await dispatchersWithOwnPools(url, 2, { leaseMs: 300, batchWindowMs: 50, fanOutBatchSize: 20 }));
    await hook(db, '61', { EventType: 'click', Url: receiver.url('/v1') });
    await hook(db, '62', { EventType: 'click', Url: receiver.url('/v2'), Version: 2 });

    const random = seededRng(20_261_126);
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const holder = async () =>
      (await db.kysely.selectFrom('leases').select('owner').where('name', '=', LEASE).where('expires_at', '>', sql<Date>`now()`).executeTakeFirst())?.owner;
    // Each dispatcher's fan-out owner: taken from the holder for a moment until both have held it.
    const owners = new Set<string>();
    await waitFor('both dispatchers to have held the fan-out lease', async () => {
      const h = await holder();
      if (h !== undefined && h !== 'intruder') owners.add(h);
      if (owners.size < 2) await sql`UPDATE leases SET owner = 'intruder', expires_at = now() + interval '150 milliseconds' WHERE name = ${LEASE}`.execute(db.kysely);
      return owners.size === 2;
    }, 20_000, 200);
    // Then, over and over, the lease is given from its holder to the other dispatcher, as when a
    // holder stalls past its lease: the holder finds it lost at its next renewal, maybe mid-step.
    let churning = true;
    let handovers = 0;
    const churn = (async () => {
      while (churning) {
        const from = await holder();
        const to = [...owners].find((o) => o !== from);
        if (from !== undefined && to !== undefined) {
          const { numAffectedRows } = await sql`
            UPDATE leases SET owner = ${to}, expires_at = now() + interval '300 milliseconds'
            WHERE name = ${LEASE} AND owner = ${from}`.execute(db.kysely);
          if (numAffectedRows === 1n) handovers += 1;
        }
        await pause(50 + random() * 150);
      }
    })();
    const rounds = 100;
    const perRound = 3;
    try {
      for (let round = 0; round < rounds; round++) {
        for (const tenant of ['61', '62']) {
          const clicks = Array.from({ length: perRound }, (_, i) => {
            const n = round * perRound + i;
            return { event: 'click', time: 1_700_000_000 + n, MessageID: String(1 + n), email: `c${n}@example.com`, url: 'https://example.com/x', EventID: `churn-${tenant}-${n}` };
          });
          await append(db, tenant, clicks);
        }
        await pause(20 + random() * 40);
      }
    } finally {
      churning = false;
      await churn;
    }
    const events = rounds * perRound;
    await outboxEmpty(db, 60_000);
    await receiver.waitForIds(events, '/v1');
    const inArrays = () => new Set(receiver.at('/v2').flatMap((r) => (JSON.parse(r.body) as { MessageID: number }[]).map((e) => e.MessageID)));
    await waitFor(`${events} events at the Version 2 URL`, async () => inArrays().size >= events, 30_000);
    expect(handovers).toBeGreaterThan(10);
    expect(dispatchers.map((d) => d.stats.fanOut.batches > 0)).toEqual([true, true]);
    expect(receiver.ids('/v1').size).toBe(events);
    expect([...inArrays()].sort((a, b) => a - b)).toEqual(Array.from({ length: events }, (_, n) => 1 + n));
  }, 120_000);
});
