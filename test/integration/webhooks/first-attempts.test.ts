import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * Version 1 first attempts beyond the free slots: the fan-out hands over what fits and leaves
 * the rest unclaimed, and they go out as slots free up, each once. Polling is set to a minute,
 * so only the lane's own wake-ups (a URL's request finishing, a full lane emptying) can bring
 * the waiting rows out within the test's time.
 */

const CASES = [
  { name: 'URL at its cap', concurrency: 64, urlConcurrency: 2 },
  { name: 'lane full', concurrency: 2, urlConcurrency: 8 },
] as const;

describe.each(DIALECTS)('first attempts beyond the free slots on %s', (dialect) => {
  describe.each(CASES)('$name', ({ concurrency, urlConcurrency }) => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let receiver: WebhookReceiver;
    let dispatcher: Dispatcher;

    beforeAll(async () => {
      ({ db, cleanup } = await openMigratedDb(dialect));
      receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs: 20 }));
      await hook(db, '1', { EventType: 'open', Url: receiver.url('/v1/open') });
      dispatcher = await startDispatcher(db, { concurrency, urlConcurrency, pollMs: 60_000 });
    });
    afterAll(async () => {
      await dispatcher?.stop();
      await receiver?.close();
      await cleanup?.();
    });

    it('delivers every event once, as slots free up', async () => {
      const opens = Array.from({ length: 40 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(9000 + i), email: `f${i}@example.com`, EventID: `f-${i}` }));
      await append(db, '1', opens);
      await receiver.waitForIds(40, '/v1/', 15_000);
      await outboxEmpty(db, 15_000);
      const ids = receiver.at('/v1/').map((r) => r.webhookId);
      expect(new Set(ids).size).toBe(40);
      expect(ids).toHaveLength(40);
      expect(dispatcher.stats.delivered).toBe(40);
    });
  });
});
