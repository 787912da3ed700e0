import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * Version 1 first attempts beyond the free slots: the fan-out hands over what fits its slots and
 * queues, leaves the rest unclaimed, and they go out as slots free up, each once. Polling is set
 * to a minute, so only the lane's own wake-ups (a URL's request finishing, a full lane emptying)
 * can bring the waiting rows out within the test's time. Rows queued longer than they may wait
 * are left to their claims' end and then claimed like any other.
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

describe.each(DIALECTS)('first attempts queued longer than they may wait on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let receiver: WebhookReceiver;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    // One request at a time, 150 ms each: a row queued behind three others outlives its 400 ms.
    receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs: 150 }));
    await hook(db, '1', { EventType: 'open', Url: receiver.url('/v1/open') });
    dispatcher = await startDispatcher(db, { concurrency: 4, urlConcurrency: 1, timeoutMs: 400, pollMs: 50 });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await receiver?.close();
    await cleanup?.();
  });

  it('delivers every event once, the late ones after their claims ran out', async () => {
    const opens = Array.from({ length: 12 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(9100 + i), email: `q${i}@example.com`, EventID: `q-${i}` }));
    await append(db, '1', opens);
    await receiver.waitForIds(12, '/v1/', 20_000);
    await outboxEmpty(db, 15_000);
    const ids = receiver.at('/v1/').map((r) => r.webhookId);
    expect(ids).toHaveLength(12);
    expect(new Set(ids).size).toBe(12);
    expect(dispatcher.stats.delivered).toBe(12);
  });
});
