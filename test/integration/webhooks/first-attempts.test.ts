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

type DispatcherSettings = Parameters<typeof startDispatcher>[1];

/** A database with one Version 1 open URL on a receiver answering 200 after `delayMs`, and a dispatcher; torn down after the block. */
function withDispatcher(dialect: (typeof DIALECTS)[number], delayMs: number, settings: DispatcherSettings) {
  const ctx = {} as { db: Db; receiver: WebhookReceiver; dispatcher: Dispatcher };
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    let db: Db;
    ({ db, cleanup } = await openMigratedDb(dialect));
    ctx.db = db;
    ctx.receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs }));
    await hook(db, '1', { EventType: 'open', Url: ctx.receiver.url('/v1/open') });
    ctx.dispatcher = await startDispatcher(db, settings);
  });
  afterAll(async () => {
    await ctx.dispatcher?.stop();
    await ctx.receiver?.close();
    await cleanup?.();
  });
  return ctx;
}

/** Appends `n` opens and checks each reached the receiver exactly once. */
async function deliversEachOnce(ctx: ReturnType<typeof withDispatcher>, n: number, prefix: string, firstMessageId: number): Promise<void> {
  const opens = Array.from({ length: n }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(firstMessageId + i), email: `${prefix}${i}@example.com`, EventID: `${prefix}-${i}` }));
  await append(ctx.db, '1', opens);
  await ctx.receiver.waitForIds(n, '/v1/', 20_000);
  await outboxEmpty(ctx.db, 15_000);
  const ids = ctx.receiver.at('/v1/').map((r) => r.webhookId);
  expect(ids).toHaveLength(n);
  expect(new Set(ids).size).toBe(n);
  expect(ctx.dispatcher.stats.delivered).toBe(n);
}

describe.each(DIALECTS)('first attempts beyond the free slots on %s', (dialect) => {
  describe.each(CASES)('$name', ({ concurrency, urlConcurrency }) => {
    const ctx = withDispatcher(dialect, 20, { concurrency, urlConcurrency, pollMs: 60_000 });

    it('delivers every event once, as slots free up', async () => {
      await deliversEachOnce(ctx, 40, 'f', 9000);
    });
  });
});

describe.each(DIALECTS)('first attempts queued longer than they may wait on %s', (dialect) => {
  // One request at a time, 150 ms each: a row queued behind three others outlives its 400 ms.
  const ctx = withDispatcher(dialect, 150, { concurrency: 4, urlConcurrency: 1, timeoutMs: 400, pollMs: 50 });

  it('delivers every event once, the late ones after their claims ran out', async () => {
    await deliversEachOnce(ctx, 12, 'q', 9100);
  });
});
