import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';
import { sql } from 'kysely';
import { readCheckpoint } from '../../../src/log/checkpoints.js';
import { FAN_OUT_LEASE, WEBHOOKS_CHECKPOINT } from '../../../src/webhooks/fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT } from '../../../src/webhooks/first-attempts-ledger.js';
import { insertDeliveries } from '../../../src/webhooks/outbox.js';
import { deleteCallbackUrl, updateCallbackUrl } from '../../../src/webhooks/callback-url-store.js';
import { waitFor } from '../../support/harness.js';

/**
 * Version 1 first attempts beyond the free slots: the fan-out hands over what fits its slots and
 * queues, leaves the rest unclaimed, and they go out as slots free up, each once. Polling is set
 * to a minute, so only the lane's own wake-ups (a URL's request finishing, a full lane emptying)
 * can bring the waiting rows out within the test's time. Rows queued longer than they may wait
 * are handed to the outbox and claimed like any other. After a crash, the next fan-out holder
 * sends again the first attempts sent straight from the log whose outcome was never recorded.
 */

const CASES = [
  { name: 'URL at its cap', concurrency: 64, urlConcurrency: 2 },
  { name: 'lane full', concurrency: 2, urlConcurrency: 8 },
] as const;

type DispatcherSettings = Parameters<typeof startDispatcher>[1];

/** A database and a receiver answering 200 after `delayMs`; the test starts its dispatcher (`ctx.dispatcher`); all torn down after the block. */
function withReceiver(dialect: (typeof DIALECTS)[number], delayMs: number, setup: (db: Db) => Promise<void> = async () => {}) {
  const ctx = {} as { db: Db; receiver: WebhookReceiver; dispatcher?: Dispatcher };
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ db: ctx.db, cleanup } = await openMigratedDb(dialect));
    ctx.receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs }));
    await setup(ctx.db);
  });
  afterAll(async () => {
    await ctx.dispatcher?.stop();
    await ctx.receiver?.close();
    await cleanup?.();
  });
  return ctx;
}

/** withReceiver, with one Version 1 open URL and a dispatcher started before the tests. */
function withDispatcher(dialect: (typeof DIALECTS)[number], delayMs: number, settings: DispatcherSettings) {
  const ctx = withReceiver(dialect, delayMs);
  beforeAll(async () => {
    await hook(ctx.db, '1', { EventType: 'open', Url: ctx.receiver.url('/v1/open') });
    ctx.dispatcher = await startDispatcher(ctx.db, settings);
  });
  return ctx as Required<typeof ctx>;
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

  it('delivers every event once, the late ones through the outbox', async () => {
    await deliversEachOnce(ctx, 12, 'q', 9100);
    // Every attempt has a delivery id of its own, whether it had an outbox row or not.
    const attempts = await ctx.db.kysely.selectFrom('webhook_attempts').select(['delivery_id', 'webhook_id']).execute();
    expect(attempts).toHaveLength(12);
    expect(attempts.every((a) => a.delivery_id > 0n)).toBe(true);
    expect(new Set(attempts.map((a) => a.delivery_id)).size).toBe(12);
  });
});

describe.each(DIALECTS)('first attempts left without an outcome by a crash, on %s', (dialect) => {
  const ctx = withReceiver(dialect, 0);

  it('are sent again by the next fan-out holder; those with an attempt or an outbox row, and Version 2 batches, are not', async () => {
    const { db, receiver } = ctx;
    const v1 = await hook(db, '1', { EventType: 'open', Url: receiver.url('/v1/open') });
    await hook(db, '1', { EventType: 'click', Url: receiver.url('/v2/click'), Version: 2 });
    const opens = Array.from({ length: 6 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(9200 + i), email: `r${i}@example.com`, EventID: `r-${i}` }));
    const clicks = [{ event: 'click', time: 1_433_334_100, MessageID: '9300', email: 'c@example.com', url: 'https://example.com/', EventID: 'r-click' }];
    await append(db, '1', [...opens, ...clicks]);
    const { rows } = await sql<{ position: string; type: string }>`SELECT position::text AS position, type FROM events ORDER BY position`.execute(db.kysely);
    const openIds = rows.filter((r) => r.type === 'open').map((r) => `msg_${r.position}`);
    const head = BigInt(rows.at(-1)?.position ?? 0);
    // As a crashed holder leaves it: the fan-out checkpoint at the head, the low-water mark at
    // 0; the first open delivered (an attempt row), the second failed (an outbox row, due
    // later); the click's Version 2 batch enqueued; the other four opens sent with no outcome.
    await sql`INSERT INTO checkpoints (name, position) VALUES (${WEBHOOKS_CHECKPOINT}, ${head}), (${FIRST_ATTEMPTS_CHECKPOINT}, 0)
      ON CONFLICT (name) DO UPDATE SET position = excluded.position`.execute(db.kysely);
    await sql`INSERT INTO webhook_attempts (attempted_at, api_key_id, url_id, delivery_id, webhook_id, attempt, event_count, outcome, status_code, latency_ms)
      VALUES (now(), 1, ${v1.id}, 1, ${openIds[0]}, 1, 1, 'delivered', 200, 3)`.execute(db.kysely);
    await sql`INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, retry, attempts, due_at)
      VALUES (1, ${v1.id}, ${openIds[1]}, ARRAY['{}'], ARRAY[1]::bigint[], 2, true, 1, now() + interval '1 hour')`.execute(db.kysely);

    const dispatcher = (ctx.dispatcher = await startDispatcher(db));
    await receiver.waitForIds(4, '/v1/', 20_000);
    await waitFor('the low-water checkpoint at the head', async () => (await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT)) === head, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.at('/v1/').map((r) => r.webhookId).sort()).toEqual(openIds.slice(2).sort());
    expect(receiver.at('/v2/')).toHaveLength(0);
    expect(dispatcher.stats.fanOut.recovered).toBe(4);
  });
});

describe.each(DIALECTS)('a recovery after a Version 2 URL changed status, on %s', (dialect) => {
  const ctx = withReceiver(dialect, 0);

  it('sends again the first attempt left without an outcome, and none of the Version 2 batch already delivered', async () => {
    const { db, receiver } = ctx;
    // Tenant 1's open, sent straight from the log, is what a crash leaves without an outcome.
    await append(db, '1', [{ event: 'open', time: 1_433_334_000, MessageID: '9700', email: 'a@example.com', EventID: 'v-open' }]);
    const v2 = await hook(db, '2', { EventType: 'sent', Url: receiver.url('/v2/sent'), Version: 2 });
    await append(db, '2', Array.from({ length: 5 }, (_, i) => ({ event: 'sent', time: 1_433_334_000 + i, MessageID: String(9710 + i), email: `v${i}@example.com`, EventID: `v-${i}` })));
    const first = await startDispatcher(db);
    await outboxEmpty(db, 15_000);
    await waitFor('the batch delivered', async () => receiver.at('/v2/').flatMap((r) => JSON.parse(r.body) as unknown[]).length === 5);
    await first.stop();
    // As a crash with that open in flight leaves it: the low-water mark below it. Then tenant 2
    // turns its URL off and on again, after its batch went out.
    await hook(db, '1', { EventType: 'open', Url: receiver.url('/v1/open') });
    await sql`UPDATE checkpoints SET position = 0 WHERE name = ${FIRST_ATTEMPTS_CHECKPOINT}`.execute(db.kysely);
    await updateCallbackUrl(db.kysely, '2', v2.id, { Status: 'dead' });
    await updateCallbackUrl(db.kysely, '2', v2.id, { Status: 'alive' });

    const second = (ctx.dispatcher = await startDispatcher(db));
    await receiver.waitForIds(1, '/v1/', 20_000);
    await outboxEmpty(db, 15_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(second.stats.fanOut.recovered).toBe(1);
    expect(receiver.at('/v2/').flatMap((r) => JSON.parse(r.body) as unknown[])).toHaveLength(5);
    // The batch's attempt row names its events.
    const attempts = await sql<{ positions: string[] | null }>`SELECT positions::text[] AS positions FROM webhook_attempts WHERE webhook_id LIKE 'bat_%'`.execute(db.kysely);
    expect(attempts.rows.map((r) => r.positions?.length)).toEqual([5]);
  });
});

describe.each(DIALECTS)('first attempts queued for a URL when it changes, on %s', (dialect) => {
  // One request at a time per URL, 300 ms each: the later events wait in the lane's queue.
  const ctx = withReceiver(dialect, 300);

  it('go to the URL as it is now (a new address), and not at all to a deleted one or one now for another type', async () => {
    const { db, receiver } = ctx;
    const moved = await hook(db, '1', { EventType: 'sent', Url: receiver.url('/old/sent') });
    const deleted = await hook(db, '2', { EventType: 'sent', Url: receiver.url('/deleted/sent') });
    const retyped = await hook(db, '3', { EventType: 'sent', Url: receiver.url('/retyped/') });
    ctx.dispatcher = await startDispatcher(db, { urlConcurrency: 1, timeoutMs: 10_000 });
    const sends = (tenant: string) => Array.from({ length: 6 }, (_, i) => ({ event: 'sent', time: 1_433_334_000 + i, MessageID: String(9600 + i), email: `m${i}@example.com`, EventID: `m-${tenant}-${i}` }));
    await append(db, '1', sends('1'));
    await append(db, '2', sends('2'));
    await append(db, '3', sends('3'));
    await waitFor('one request at each URL', async () => receiver.at('/old/').length === 1 && receiver.at('/deleted/').length === 1 && receiver.at('/retyped/').length === 1, 10_000, 5);
    await updateCallbackUrl(db.kysely, '1', moved.id, { Url: receiver.url('/new/sent') });
    await deleteCallbackUrl(db.kysely, '2', deleted.id);
    // Now a URL for opens: the sent events queued for it are no longer its to take.
    await updateCallbackUrl(db.kysely, '3', retyped.id, { EventType: 'open' });
    await waitFor('the rest at the new address', async () => receiver.at('/new/').length === 5, 20_000);
    await outboxEmpty(db, 15_000);
    await new Promise((r) => setTimeout(r, 700));
    // At most the request in flight at the change reached the old address, or the deleted URL.
    expect(receiver.at('/old/').length).toBeLessThanOrEqual(2);
    expect(receiver.at('/deleted/').length).toBeLessThanOrEqual(2);
    expect(receiver.at('/retyped/').length).toBeLessThanOrEqual(2);
    expect(new Set([...receiver.at('/old/'), ...receiver.at('/new/')].map((r) => r.webhookId)).size).toBe(6);
    expect(receiver.at('/old/').length + receiver.at('/new/').length).toBe(6);
  });
});

describe.each(DIALECTS)('first attempts left without an outcome by a crash, their URL switched to Version 2 before the recovery, on %s', (dialect) => {
  const ctx = withReceiver(dialect, 0);

  it('are sent again, to the URL as it is now; a Version 2 batch still in the outbox is not', async () => {
    const { db, receiver } = ctx;
    const opens = await hook(db, '1', { EventType: 'open', Url: receiver.url('/switched/open') });
    const clicks = await hook(db, '1', { EventType: 'click', Url: receiver.url('/v2/click'), Version: 2 });
    await append(db, '1', [
      ...Array.from({ length: 3 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(9400 + i), email: `w${i}@example.com`, EventID: `w-${i}` })),
      { event: 'click', time: 1_433_334_100, MessageID: '9500', email: 'c@example.com', url: 'https://example.com/', EventID: 'w-click' },
    ]);
    const { rows } = await sql<{ position: string; type: string }>`SELECT position::text AS position, type FROM events ORDER BY position`.execute(db.kysely);
    const head = BigInt(rows.at(-1)?.position ?? 0);
    const clickPosition = rows.find((r) => r.type === 'click')?.position ?? '0';
    // As a crashed holder leaves it: the three opens sent straight from the log with no outcome
    // (Version 1 then), the click's batch in the outbox, due later. Then, before any dispatcher
    // runs again, the opens' URL is switched to Version 2 (as it would be if it had died and
    // its backup were Version 2).
    await sql`INSERT INTO checkpoints (name, position) VALUES (${WEBHOOKS_CHECKPOINT}, ${head}), (${FIRST_ATTEMPTS_CHECKPOINT}, 0)
      ON CONFLICT (name) DO UPDATE SET position = excluded.position`.execute(db.kysely);
    await sql`INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, retry, attempts, due_at)
      VALUES (1, ${clicks.id}, 'bat_waiting', ARRAY['{}'], ARRAY[${clickPosition}]::bigint[], 2, false, 0, now() + interval '1 hour')`.execute(db.kysely);
    await updateCallbackUrl(db.kysely, '1', opens.id, { Version: 2 });

    const dispatcher = (ctx.dispatcher = await startDispatcher(db));
    await waitFor('the opens delivered', async () => receiver.at('/switched/').flatMap((r) => JSON.parse(r.body) as unknown[]).length === 3, 20_000);
    await waitFor('the low-water checkpoint at the head', async () => (await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT)) === head, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    const delivered = receiver.at('/switched/').flatMap((r) => JSON.parse(r.body) as { MessageID: number }[]);
    expect(delivered.map((e) => e.MessageID).sort()).toEqual([9400, 9401, 9402]);
    expect(receiver.at('/v2/')).toHaveLength(0);
    expect(dispatcher.stats.fanOut.recovered).toBe(1);
  });
});

describe.each(DIALECTS)('a backlog larger than the first lane can hold, on %s', (dialect) => {
  // 7 URLs of 4 slots, a lane of 32 (queues: 64 per URL, 512 in all), reads of 200 events: read
  // as fast as the log allows, the 1,400-event backlog would overflow the URLs' queues into the
  // outbox within a few reads. Paced by the lane, the fan-out sends all of it from the log.
  const TYPES = ['sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub'] as const;
  // A trigger counts the rows ever written to the outbox.
  const ctx = withReceiver(dialect, 5, async (db) => {
    await sql`CREATE TABLE outbox_inserts (n int NOT NULL)`.execute(db.kysely);
    await sql`CREATE FUNCTION count_outbox_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO outbox_inserts SELECT count(*) FROM new_rows; RETURN NULL; END $$`.execute(db.kysely);
    await sql`CREATE TRIGGER count_outbox_inserts AFTER INSERT ON webhook_deliveries REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION count_outbox_inserts()`.execute(db.kysely);
  });

  it('is sent straight from the log, the fan-out waiting for the lane, each event once', async () => {
    const { db, receiver } = ctx;
    for (const type of TYPES) await hook(db, '1', { EventType: type, Url: receiver.url(`/v1/${type}`) });
    const events = Array.from({ length: 1400 }, (_, i) => ({ event: TYPES[i % TYPES.length], time: 1_433_334_000 + i, MessageID: String(20_000 + i), email: `b${i}@example.com`, url: 'https://example.com/', error_related_to: 'recipient', error: 'user unknown', EventID: `b-${i}` }));
    await append(db, '1', events);
    const dispatcher = (ctx.dispatcher = await startDispatcher(db, { concurrency: 32, urlConcurrency: 4, fanOutBatchSize: 200, pollMs: 1000 }));
    await receiver.waitForIds(1400, '/v1/', 30_000);
    await outboxEmpty(db, 15_000);
    const ids = receiver.at('/v1/').map((r) => r.webhookId);
    expect(ids).toHaveLength(1400);
    expect(new Set(ids).size).toBe(1400);
    expect(dispatcher.stats.fanOut.paced).toBeGreaterThan(0);
    const { rows } = await sql<{ n: string }>`SELECT coalesce(sum(n), 0)::text AS n FROM outbox_inserts`.execute(db.kysely);
    expect(Number(rows[0]?.n)).toBe(0);
  });
});

describe.each(DIALECTS)('the fan-out lease lost for a moment while first attempts are in flight, on %s', (dialect) => {
  let db: Db;
  let cleanup: (() => Promise<void>) | undefined;
  let dispatcher: Dispatcher | undefined;
  const held: http.ServerResponse[] = [];
  const ids: string[] = [];
  let holding = true;
  const answer = (res: http.ServerResponse) => res.writeHead(200, { 'content-length': '2' }).end('ok');
  // A receiver that holds its answers while `holding`, then answers them all at once.
  const server = http.createServer((req, res) => {
    ids.push(String(req.headers['webhook-id']));
    req.resume().on('end', () => (holding ? held.push(res) : answer(res)));
  });
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    holding = false;
    held.splice(0).forEach(answer);
    await dispatcher?.stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await cleanup?.();
  });

  it('sends none of its own first attempts again when it takes the lease back', async () => {
    // The first attempts in flight when the lease comes back are answered just as the holder,
    // reading the log one event at a time, looks for those left without an outcome: their
    // outcomes land after its query for them but before it reaches their events. No process
    // crashed, so none may be sent twice.
    const port = (server.address() as AddressInfo).port;
    const tenants = ['1', '2', '3', '4'];
    for (const t of tenants) await hook(db, t, { EventType: 'open', Url: `http://127.0.0.1:${port}/v1/t${t}` });
    dispatcher = await startDispatcher(db, { urlConcurrency: 32, fanOutBatchSize: 1, timeoutMs: 30_000, leaseMs: 1500 });
    const owner = dispatcher.stats.fanOut;
    for (const t of tenants) {
      await append(db, t, Array.from({ length: 50 }, (_, i) => ({ event: 'open', time: 1_433_335_000 + i, MessageID: String(30_000 + i), email: `l${i}@example.com`, EventID: `lease-${t}-${i}` })));
    }
    await waitFor('first attempts in flight', async () => held.length >= 60, 20_000);
    // Another owner holds the lease for 1 s, as a dispatcher that took it over during a pause would.
    await sql`UPDATE leases SET owner = 'someone-else', expires_at = now() + interval '1 second' WHERE name = ${FAN_OUT_LEASE}`.execute(db.kysely);
    await waitFor('the lease lost', async () => !owner.held, 10_000, 5);
    await waitFor('the lease back', async () => owner.held, 10_000, 1);
    await new Promise((r) => setTimeout(r, 5));
    holding = false;
    held.splice(0).forEach(answer);
    await waitFor('every event sent', async () => new Set(ids).size === 200, 30_000);
    await outboxEmpty(db, 30_000);
    await waitFor('the low-water checkpoint at the head', async () => (await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT)) === (await readCheckpoint(db.kysely, WEBHOOKS_CHECKPOINT)), 20_000);
    expect(ids.length - new Set(ids).size).toBe(0);
    expect(owner.recovered).toBe(0);
  }, 120_000);
});

describe('a URL kept busy by first attempts from the log, on postgres', () => {
  // 60 events a second for a URL that takes 40 (2 slots, 50 ms a request): its queue here never
  // runs dry while the producer goes on, and what spills over, or waits too long, goes to the outbox.
  const ctx = withReceiver('postgres', 50);

  it('still has its outbox rows claimed (a replay, here), in turn with its queue, before the producer stops', async () => {
    const { db, receiver } = ctx;
    const url = await hook(db, '1', { EventType: 'open', Url: receiver.url('/v1/busy') });
    ctx.dispatcher = await startDispatcher(db, { urlConcurrency: 2, timeoutMs: 1000, pollMs: 250, adaptiveConcurrency: false });
    const started = Date.now();
    let k = 0;
    let replayed = false;
    while (Date.now() - started < 3000) {
      const batch = Array.from({ length: 6 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + k, MessageID: String(40_000 + k * 10 + i), email: `busy${i}@example.com`, EventID: `busy-${k}-${i}` }));
      k += 1;
      await append(db, '1', batch);
      if (!replayed && Date.now() - started > 500) {
        replayed = true;
        await insertDeliveries(db.kysely, [{ apiKeyId: 1n, urlId: url.id, webhookId: 'msg_replayed', events: ['{"event":"open","MessageID":1}'], positions: [1n], bytes: 30, delayMs: 0 }]);
        ctx.dispatcher.wake();
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const stoppedAt = performance.timeOrigin + performance.now();
    await waitFor('the replayed row at the receiver', async () => receiver.ids().has('msg_replayed'), 60_000);
    const got = receiver.requests.find((r) => r.webhookId === 'msg_replayed');
    // The code before claimed it only once the queue ran dry: after the producer stopped.
    expect((got?.at ?? Infinity) < stoppedAt).toBe(true);
  });
});
