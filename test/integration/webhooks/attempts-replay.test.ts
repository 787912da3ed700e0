import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { stringifyExactJson } from '../../../src/events/exact-json.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { replayWebhookEvents } from '../../../src/webhooks/replay-webhooks.js';
import { attemptToWire, listWebhookAttempts } from '../../../src/webhooks/webhook-attempts.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { append, positionsInLog } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { FAST, hook, outboxEmpty, startDispatcher } from './fixture.js';

/** A tenant sees its own attempts (filters, paging) and can send a range of its events again. */

const GROUPING = { windowMs: 0, maxEvents: FAST.batchMaxEvents, maxBytes: FAST.batchMaxBytes };
const page = { limit: 100, offset: 0 };

describe.each(DIALECTS)('attempts and replay on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let receiver: WebhookReceiver;
  let dispatcher: Dispatcher;
  let openUrl: bigint;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    receiver = await WebhookReceiver.start((r) => (r.path === '/bounce' ? { status: 503, body: 'maintenance' } : { status: 200 }));
    openUrl = (await hook(db, '51', { EventType: 'open', Url: receiver.url('/open') })).id;
    await hook(db, '51', { EventType: 'bounce', Url: receiver.url('/bounce') });
    await hook(db, '52', { EventType: 'open', Url: receiver.url('/other') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [0.05] });
    const events = Array.from({ length: 6 }, (_, i) => ({ event: i < 5 ? 'open' : 'bounce', time: 1_700_000_000 + i, MessageID: String(500 + i), email: `o${i}@example.com`, EventID: `r-${i}` }));
    await append(db, '51', events);
    await append(db, '52', [{ event: 'open', time: 1_700_000_000, MessageID: '9', email: 'x@example.com', EventID: 'other' }]);
    await outboxEmpty(db);
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await receiver?.close();
    await cleanup?.();
  });

  it('lists the tenant`s attempts, newest first, with filters and paging', async () => {
    const all = await listWebhookAttempts(db.kysely, '51', {}, page);
    // 5 opens delivered; the bounce: 2 failed attempts (then the URL died and it was dropped).
    expect(all.rows.filter((r) => r.outcome === 'delivered')).toHaveLength(5);
    expect(all.rows.filter((r) => r.outcome === 'failed').map((r) => [r.status_code, r.error_class, r.response_snippet])).toEqual([
      [503, 'http_status', 'maintenance'],
      [503, 'http_status', 'maintenance'],
    ]);
    expect(all.total).toBe(all.rows.length);
    expect(all.rows.map((r) => r.id)).toEqual([...all.rows.map((r) => r.id)].sort((a, b) => (a < b ? 1 : -1)));
    const opens = await listWebhookAttempts(db.kysely, '51', { urlId: openUrl, outcome: 'delivered' }, { limit: 2, offset: 1 });
    expect({ n: opens.rows.length, total: opens.total }).toEqual({ n: 2, total: 5 });
    const first = all.rows.at(-1);
    if (first === undefined) throw new Error('no attempts');
    expect((await listWebhookAttempts(db.kysely, '51', { webhookId: first.webhook_id }, page)).rows.map((r) => r.id)).toContain(first.id);
    expect((await listWebhookAttempts(db.kysely, '51', { from: new Date(Date.now() + 60_000) }, page)).total).toBe(0);
    expect((await listWebhookAttempts(db.kysely, '52', {}, page)).rows.every((r) => r.api_key_id === 52n)).toBe(true);
    expect((await listWebhookAttempts(db.kysely, '53', {}, page)).total).toBe(0);
    const wire = attemptToWire(first);
    expect(Object.keys(wire)).toEqual(['ID', 'AttemptedAt', 'CallbackUrlID', 'DeliveryID', 'WebhookID', 'Attempt', 'EventCount', 'Outcome', 'StatusCode', 'LatencyMs', 'ErrorClass', 'ResponseSnippet']);
    expect(stringifyExactJson(wire)).toMatch(/^\{"ID":\d+,"AttemptedAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","CallbackUrlID":\d+,/);
  });

  it('replays a position range to the URLs, with the original webhook ids', async () => {
    const position = await positionsInLog(db, '51');
    const before = receiver.at('/open').length;
    const result = await replayWebhookEvents(db.kysely, '51', { fromPosition: position('r-0'), toPosition: position('r-2') }, GROUPING);
    expect(result).toEqual({ events: 2, deliveries: 2, nextPosition: null });
    await waitFor('replayed deliveries', async () => receiver.at('/open').length === before + 2);
    expect(receiver.at('/open').slice(before).map((r) => r.webhookId).sort()).toEqual([`msg_${position('r-1')}`, `msg_${position('r-2')}`].sort());
    expect(receiver.at('/other')).toHaveLength(1);
  });

  it('replays a time range, by type, a bounded number at a time', async () => {
    const before = receiver.at('/open').length;
    const first = await replayWebhookEvents(db.kysely, '51', { fromTime: new Date(Date.now() - 3_600_000), eventTypes: ['open'] }, GROUPING, 3);
    expect(first.events).toBe(3);
    expect(first.nextPosition).not.toBeNull();
    const rest = await replayWebhookEvents(db.kysely, '51', { fromPosition: first.nextPosition ?? 0n, eventTypes: ['open'] }, GROUPING, 3);
    expect(rest).toEqual({ events: 2, deliveries: 2, nextPosition: null });
    await waitFor('replayed deliveries', async () => receiver.at('/open').length === before + 5);
    expect(await replayWebhookEvents(db.kysely, '51', { fromTime: new Date(Date.now() + 3_600_000) }, GROUPING)).toEqual({ events: 0, deliveries: 0, nextPosition: null });
    await outboxEmpty(db);
  });

  it('leaves out the events the dispatcher has not reached yet: they are sent once, by the fan-out', async () => {
    await dispatcher.stop();
    const head = (await positionsInLog(db, '51'))('r-5');
    const before = receiver.at('/open').length;
    await append(db, '51', [0, 1].map((i) => ({ event: 'open', time: 1_700_000_100 + i, MessageID: String(600 + i), email: `n${i}@example.com`, EventID: `n-${i}` })));
    // Before this, these two were enqueued here and then fanned out as well: each sent twice.
    expect(await replayWebhookEvents(db.kysely, '51', { fromPosition: head, eventTypes: ['open'] }, GROUPING)).toEqual({ events: 0, deliveries: 0, nextPosition: null });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [0.05] });
    await waitFor('the new events delivered', async () => receiver.at('/open').length >= before + 2);
    await outboxEmpty(db);
    const position = await positionsInLog(db, '51');
    expect(receiver.at('/open').slice(before).map((r) => r.webhookId).sort()).toEqual([`msg_${position('n-0')}`, `msg_${position('n-1')}`].sort());
    // Once passed, they can be sent again.
    expect(await replayWebhookEvents(db.kysely, '51', { fromPosition: head, eventTypes: ['open'] }, GROUPING)).toEqual({ events: 2, deliveries: 2, nextPosition: null });
    await outboxEmpty(db);
  });
});
