import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { dispatchersWithOwnPools, hook, outboxEmpty } from './fixture.js';

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
});
