import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { readCheckpoint } from '../../../src/log/checkpoints.js';
import { WEBHOOKS_CHECKPOINT } from '../../../src/webhooks/fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT } from '../../../src/webhooks/first-attempts-ledger.js';
import { dispatchersWithOwnPools, hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * Three dispatchers on one database, each with its own connection pool, as three processes
 * would be: one fans out, all deliver, and in steady state no delivery is sent twice.
 */

let db: Db;
let url: string | null;
let cleanup: () => Promise<void>;
let dispatchers: Dispatcher[] = [];
let stopDispatchers: () => Promise<void> = async () => {};
let receiver: WebhookReceiver;

beforeAll(async () => {
  ({ db, url, cleanup } = await openMigratedDb('postgres'));
  receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs: 2 }));
});
afterAll(async () => {
  await stopDispatchers();
  await receiver?.close();
  await cleanup?.();
});

describe('several dispatchers', () => {
  it('share the work without sending anything twice', async () => {
    if (url === null) throw new Error('no connection string');
    ({ dispatchers, stop: stopDispatchers } = await dispatchersWithOwnPools(url, 3, { urlConcurrency: 2, concurrency: 8 }));
    const tenants = ['41', '42', '43', '44', '45'];
    for (const t of tenants) await hook(db, t, { EventType: 'click', Url: receiver.url(`/t${t}`) });
    for (const t of tenants) {
      await append(
        db,
        t,
        Array.from({ length: 100 }, (_, i) => ({ event: 'click', time: 1_700_000_000 + i, MessageID: String(i + 1), email: `c${i}@example.com`, url: 'https://example.com/x', EventID: `c-${t}-${i}` })),
      );
    }
    await receiver.waitForIds(500);
    await outboxEmpty(db);
    expect(receiver.requests).toHaveLength(500);
    expect(receiver.ids().size).toBe(500);
    for (const t of tenants) expect(receiver.at(`/t${t}`)).toHaveLength(100);
    await waitFor('stats', async () => dispatchers.reduce((n, d) => n + d.stats.delivered, 0) === 500);
    expect(dispatchers.filter((d) => d.stats.fanOut.held)).toHaveLength(1);
    expect(dispatchers.filter((d) => d.stats.delivered > 0).length).toBeGreaterThanOrEqual(2);
  });

  it('a graceful stop of the fan-out holder sends nothing twice: it keeps the lease until the outcomes of its first attempts are written', async () => {
    if (url === null) throw new Error('no connection string');
    // The dispatchers of the test before let the fan-out go.
    await stopDispatchers();
    stopDispatchers = async () => {};
    // Answers after 1.5 s, so the holder is stopped with every first attempt in flight.
    const slow = await WebhookReceiver.start(() => ({ status: 200, delayMs: 1500 }));
    const pools = [await connectDb({ kind: 'postgres', url, poolSize: 4 }), await connectDb({ kind: 'postgres', url, poolSize: 4 })];
    const running = new Set<Dispatcher>();
    try {
      const options = { urlConcurrency: 32, timeoutMs: 5000 };
      const holder = await startDispatcher(pools[0] as Db, options);
      running.add(holder);
      await waitFor('the first dispatcher holds the fan-out', async () => holder.stats.fanOut.held);
      const other = await startDispatcher(pools[1] as Db, options);
      running.add(other);
      await hook(db, '46', { EventType: 'sent', Url: slow.url('/s46') });
      await append(db, '46', Array.from({ length: 20 }, (_, i) => ({ event: 'sent', time: 1_700_000_000 + i, MessageID: String(900 + i), email: `s${i}@example.com`, EventID: `stop-${i}` })));
      await waitFor('20 first attempts in flight', async () => slow.requests.length === 20);
      await holder.stop();
      running.delete(holder);
      // It let the lease go with its low-water mark at its checkpoint: nothing of its own is left to look for.
      expect(await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT)).toBe(await readCheckpoint(db.kysely, WEBHOOKS_CHECKPOINT));
      await waitFor('the other dispatcher takes the fan-out', async () => other.stats.fanOut.held, 20_000);
      // Time for its recovery to send what it found without an outcome, and for that to arrive.
      await new Promise((r) => setTimeout(r, 2500));
      expect(other.stats.fanOut.recovered).toBe(0);
      expect(slow.requests).toHaveLength(20);
      expect(slow.ids().size).toBe(20);
    } finally {
      for (const d of running) await d.stop();
      for (const p of pools) await p.close();
      await slow.close();
    }
  }, 60_000);
});
