import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { getCallbackUrl, updateCallbackUrl } from '../../../src/webhooks/callback-url-store.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { append } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher, urlStatus } from './fixture.js';

/**
 * With a compressed WEBHOOK_RETRY_SCHEDULE: a URL failing for the whole window turns dead (with
 * a backlog too, its deliveries still far from their last retry); its
 * pending and later events go to the alive backup (or, with none, are dropped and say so);
 * PUTting a new Url revives it, and gives its waiting retries a fresh schedule. A delivery that
 * fails alone while its URL works expires alone.
 */

const SCHEDULE = [0.05, 0.05, 0.05];
let db: Db;
let cleanup: () => Promise<void>;
let receiver: WebhookReceiver;
let dispatcher: Dispatcher | null = null;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
  receiver = await WebhookReceiver.start((r) =>
    r.path.startsWith('/hang') ? { hang: true } : r.path.startsWith('/broken') || r.body.includes('poison') ? { status: 500 } : { status: 200 },
  );
});
afterEach(async () => {
  await dispatcher?.stop();
  dispatcher = null;
});
afterAll(async () => {
  await receiver?.close();
  await cleanup?.();
});

const sends = (prefix: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ event: 'sent', time: 1_700_000_000 + from + i, MessageID: String(from + i), email: `s${from + i}@example.com`, EventID: `${prefix}-${from + i}` }));

/** MessageIDs of the events that reached `path` (bodies are objects or arrays). */
function messageIds(path: string): number[] {
  return receiver
    .at(path)
    .flatMap((r) => {
      const body = JSON.parse(r.body) as { MessageID: number } | { MessageID: number }[];
      return Array.isArray(body) ? body : [body];
    })
    .map((e) => e.MessageID)
    .sort((a, b) => a - b);
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('dead URLs and backups', () => {
  it('a failing primary turns dead, the backup receives the rest, a new Url revives the primary', async () => {
    const primary = await hook(db, '31', { EventType: 'sent', Url: receiver.url('/broken/31') });
    await hook(db, '31', { EventType: 'sent', Url: receiver.url('/backup/31'), IsBackup: true, Version: 2 });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: SCHEDULE });

    await append(db, '31', sends('a', 0, 10));
    await waitFor('the primary to turn dead', async () => (await urlStatus(db, primary.id)) === 'dead');
    await outboxEmpty(db);
    const primaryRequests = receiver.at('/broken/31').length;
    expect(primaryRequests).toBeGreaterThanOrEqual(4);

    await append(db, '31', sends('b', 10, 10));
    await outboxEmpty(db);
    expect(messageIds('/backup/31')).toEqual(range(0, 20));
    expect(receiver.at('/broken/31')).toHaveLength(primaryRequests);
    const url = await getCallbackUrl(db.kysely, '31', primary.id);
    expect(url?.status).toBe('dead');
    expect(url?.deadSince).toBeInstanceOf(Date);

    const revived = await updateCallbackUrl(db.kysely, '31', primary.id, { Url: receiver.url('/fixed/31') });
    expect(revived?.status).toBe('alive');
    await append(db, '31', sends('c', 20, 5));
    await outboxEmpty(db);
    expect(messageIds('/fixed/31')).toEqual(range(20, 5));
    expect(messageIds('/backup/31')).toEqual(range(0, 20));
    expect(dispatcher.stats.urlsDied).toBe(1);
    expect(dispatcher.stats.rerouted).toBeGreaterThan(0);
  });

  it('a primary PUT to dead hands its waiting retries to the backup at once, not when each is next due', async () => {
    // Retries an hour apart: without the PUT, the failed deliveries would wait that long.
    const primary = await hook(db, '37', { EventType: 'sent', Url: receiver.url('/broken/37') });
    await hook(db, '37', { EventType: 'sent', Url: receiver.url('/backup/37'), IsBackup: true });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [3600, 3600] });
    await append(db, '37', sends('k', 700, 6));
    await waitFor('every first attempt to have failed', async () => receiver.at('/broken/37').length >= 6);
    await waitFor('the failures to be recorded', async () => {
      const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE url_id = ${primary.id} AND retry`.execute(db.kysely);
      return r.rows[0]?.n === 6;
    });
    expect(receiver.at('/backup/37')).toHaveLength(0);

    await updateCallbackUrl(db.kysely, '37', primary.id, { Status: 'dead' });
    await outboxEmpty(db, 10_000);
    expect(messageIds('/backup/37')).toEqual(range(700, 6));
    expect(receiver.at('/broken/37')).toHaveLength(6);
  });

  it('a new Url gives the URL`s waiting retries a fresh schedule at the new address, due at once', async () => {
    // Retries an hour apart: without the fresh start, the failed deliveries would wait that long,
    // and their count and first failure (at the old address) would bring the URL's death closer.
    const url = await hook(db, '39', { EventType: 'sent', Url: receiver.url('/broken/39') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [3600, 3600] });
    await append(db, '39', sends('r', 900, 5));
    const retries = async () =>
      (await sql<{ attempts: number; first_failed_at: Date | null }>`SELECT attempts, first_failed_at FROM webhook_deliveries WHERE url_id = ${url.id} AND retry`.execute(db.kysely)).rows;
    await waitFor('the failures to be recorded', async () => (await retries()).length === 5);
    const moved = new Date();

    // Another failing address: each waiting delivery is tried there at once, as a first failure.
    await updateCallbackUrl(db.kysely, '39', url.id, { Url: receiver.url('/broken/39b') });
    await waitFor('every delivery to be tried at the new address', async () => receiver.at('/broken/39b').length >= 5, 10_000);
    await waitFor('the failures there to be recorded', async () => (await retries()).every((r) => r.first_failed_at !== null && r.first_failed_at >= moved));
    expect((await retries()).map((r) => r.attempts)).toEqual([1, 1, 1, 1, 1]);

    await updateCallbackUrl(db.kysely, '39', url.id, { Url: receiver.url('/fixed/39') });
    await outboxEmpty(db, 10_000);
    expect(messageIds('/fixed/39')).toEqual(range(900, 5));
    expect(await urlStatus(db, url.id)).toBe('alive');
  });

  it('a primary PUT to dead while no dispatcher ran hands its waiting retries to the backup when one starts', async () => {
    const primary = await hook(db, '38', { EventType: 'sent', Url: receiver.url('/broken/38') });
    await hook(db, '38', { EventType: 'sent', Url: receiver.url('/backup/38'), IsBackup: true });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [3600, 3600] });
    await append(db, '38', sends('m', 800, 4));
    await waitFor('the failures to be recorded', async () => {
      const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE url_id = ${primary.id} AND retry`.execute(db.kysely);
      return r.rows[0]?.n === 4;
    });
    await dispatcher.stop();
    // Nobody listens when the URL is made dead.
    await updateCallbackUrl(db.kysely, '38', primary.id, { Status: 'dead' });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [3600, 3600] });
    await outboxEmpty(db, 10_000);
    expect(messageIds('/backup/38')).toEqual(range(800, 4));
  });

  it('a hanging primary with a backlog turns dead once it has failed for the window, not when a delivery has used every retry', async () => {
    const schedule = [0.2, 0.2, 0.2];
    const WINDOW_MS = 600;
    const primary = await hook(db, '36', { EventType: 'sent', Url: receiver.url('/hang/36') });
    await hook(db, '36', { EventType: 'sent', Url: receiver.url('/backup/36'), IsBackup: true });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: schedule, timeoutMs: 300, urlConcurrency: 4 });
    await append(db, '36', sends('j', 500, 1000));
    await waitFor('the primary to turn dead', async () => (await urlStatus(db, primary.id)) === 'dead', 120_000);
    const { rows } = await sql<{ ms: number }>`
      SELECT extract(epoch FROM u.dead_since - min(a.attempted_at)) * 1000 AS ms FROM callback_urls u JOIN webhook_attempts a ON a.url_id = u.id
      WHERE u.id = ${primary.id} GROUP BY u.dead_since`.execute(db.kysely);
    // A failure written once the window has passed kills the URL (one comes every 300 ms); the
    // code before waited for one delivery's last retry, behind the backlog's (6.4 s with this backlog).
    expect(Number(rows[0]?.ms)).toBeLessThan(WINDOW_MS + 2000);
    await outboxEmpty(db, 60_000);
    expect([...new Set(messageIds('/backup/36'))]).toEqual(range(500, 1000));
  });

  it('a failing URL turns dead no sooner than the window after its first failure, however its retries were jittered', async () => {
    // ±20 % jitter on each delay: before the last retry was held to the window, each of these
    // URLs died at the jittered sum of its delays, before the window half the time.
    const WINDOW_MS = 3000;
    const urls = await Promise.all(Array.from({ length: 20 }, (_, i) => hook(db, String(40 + i), { EventType: 'sent', Url: receiver.url(`/broken/${40 + i}`) })));
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [1, 1, 1] });
    await Promise.all(urls.map((_, i) => append(db, String(40 + i), sends(`w${i}`, 600 + i, 1))));
    for (const url of urls) await waitFor('the URL to turn dead', async () => (await urlStatus(db, url.id)) === 'dead', 30_000);
    const { rows } = await sql<{ ms: number }>`
      SELECT extract(epoch FROM u.dead_since - min(a.attempted_at)) * 1000 AS ms FROM callback_urls u JOIN webhook_attempts a ON a.url_id = u.id
      WHERE u.id = ANY(${urls.map((u) => u.id)}::bigint[]) GROUP BY u.id, u.dead_since`.execute(db.kysely);
    expect(rows).toHaveLength(20);
    for (const { ms } of rows) expect(Number(ms)).toBeGreaterThanOrEqual(WINDOW_MS);
  });

  it('a dead Version 2 primary`s pending batches reach a Version 1 backup one event per request', async () => {
    const primary = await hook(db, '34', { EventType: 'sent', Url: receiver.url('/broken/34'), Version: 2 });
    await hook(db, '34', { EventType: 'sent', Url: receiver.url('/backup/34'), IsBackup: true });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: SCHEDULE, batchMaxEvents: 4 });
    await append(db, '34', sends('h', 300, 10));
    await waitFor('the primary to turn dead', async () => (await urlStatus(db, primary.id)) === 'dead');
    await outboxEmpty(db);
    expect(receiver.at('/broken/34').every((r) => Array.isArray(JSON.parse(r.body)))).toBe(true);
    const backup = receiver.at('/backup/34');
    expect(backup.every((r) => !Array.isArray(JSON.parse(r.body)) && r.webhookId.startsWith('msg_'))).toBe(true);
    expect(messageIds('/backup/34')).toEqual(range(300, 10));
  });

  it('a batch of one event reaches a Version 1 URL under its event`s msg_ id, whether its URL died for a backup or switched Version', async () => {
    const primary = await hook(db, '76', { EventType: 'sent', Url: receiver.url('/broken/76'), Version: 2 });
    await hook(db, '76', { EventType: 'sent', Url: receiver.url('/backup/76'), IsBackup: true });
    const switched = await hook(db, '77', { EventType: 'sent', Url: receiver.url('/switch/77'), Version: 2 });
    // One event each: a batch of one, waiting for its window.
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: SCHEDULE, batchWindowMs: 1500 });
    await append(db, '76', sends('n', 500, 1));
    await append(db, '77', sends('o', 600, 1));
    await waitFor('one waiting batch of 1', async () => (await db.kysely.selectFrom('webhook_deliveries').select('webhook_id').where('url_id', '=', switched.id).execute()).length === 1);
    await updateCallbackUrl(db.kysely, '77', switched.id, { Version: 1 });
    await waitFor('the primary to turn dead', async () => (await urlStatus(db, primary.id)) === 'dead');
    await outboxEmpty(db);
    expect(receiver.at('/broken/76').every((r) => r.webhookId.startsWith('bat_'))).toBe(true);
    for (const path of ['/backup/76', '/switch/77']) {
      const got = receiver.at(path);
      expect(got.length).toBeGreaterThan(0);
      expect(got.every((r) => !Array.isArray(JSON.parse(r.body)) && r.webhookId.startsWith('msg_'))).toBe(true);
    }
    expect(messageIds('/backup/76')).toEqual([500]);
    expect(messageIds('/switch/77')).toEqual([600]);
  });

  it('a Version 2 URL switched to Version 1 gets its waiting batch as single events', async () => {
    const url = await hook(db, '35', { EventType: 'sent', Url: receiver.url('/switch/35'), Version: 2 });
    dispatcher = await startDispatcher(db, { batchWindowMs: 1500 });
    await append(db, '35', sends('i', 400, 3));
    await waitFor('one waiting batch of 3', async () => {
      const rows = await db.kysely.selectFrom('webhook_deliveries').select('events').where('url_id', '=', url.id).execute();
      return rows.length === 1 && rows[0]?.events.length === 3;
    });
    await updateCallbackUrl(db.kysely, '35', url.id, { Version: 1 });
    await outboxEmpty(db);
    const got = receiver.at('/switch/35');
    expect(got.every((r) => !Array.isArray(JSON.parse(r.body)))).toBe(true);
    expect(messageIds('/switch/35')).toEqual(range(400, 3));
  });

  it('with no backup, a dead URL`s events are dropped with a record saying why, until it is revived', async () => {
    const primary = await hook(db, '32', { EventType: 'sent', Url: receiver.url('/broken/32') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: SCHEDULE });
    await append(db, '32', sends('d', 100, 5));
    await waitFor('the URL to turn dead', async () => (await urlStatus(db, primary.id)) === 'dead');
    await outboxEmpty(db);
    const dropped = await db.kysely.selectFrom('webhook_attempts').select(['outcome', 'error_class']).where('url_id', '=', primary.id).where('outcome', '=', 'dropped').execute();
    expect(dropped.length).toBe(5);
    expect(dropped.every((d) => d.error_class === 'url_dead')).toBe(true);
    // Each drop record names the attempts its delivery made: the failures the URL's death
    // released were not counted in it before (a drop said 1 after a second failed attempt).
    const records = await db.kysely.selectFrom('webhook_attempts').select(['webhook_id', 'outcome', 'attempt']).where('url_id', '=', primary.id).execute();
    for (const drop of records.filter((r) => r.outcome === 'dropped')) {
      const failed = records.filter((r) => r.webhook_id === drop.webhook_id && r.outcome === 'failed');
      expect({ id: drop.webhook_id, attempt: drop.attempt }).toEqual({ id: drop.webhook_id, attempt: failed.length });
      expect(Math.max(...failed.map((r) => r.attempt))).toBe(failed.length);
    }

    const before = receiver.at('/broken/32').length;
    await append(db, '32', sends('e', 105, 5)); // while dead: nothing is sent
    await outboxEmpty(db);
    expect(receiver.at('/broken/32')).toHaveLength(before);

    await updateCallbackUrl(db.kysely, '32', primary.id, { url: receiver.url('/fixed/32') });
    await append(db, '32', sends('f', 110, 3));
    await outboxEmpty(db);
    expect(messageIds('/fixed/32')).toEqual(range(110, 3));
  });

  it('a delivery that keeps failing while its URL works for others expires alone', async () => {
    const url = await hook(db, '33', { EventType: 'sent', Url: receiver.url('/mostly/33') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [0.2, 0.2, 0.2] });
    const events = sends('g', 200, 6).map((e, i) => (i === 0 ? { ...e, CustomID: 'poison' } : e));
    await append(db, '33', events.slice(0, 1));
    // Successes keep coming while the poison one is retried.
    for (let i = 1; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 120));
      await append(db, '33', events.slice(i, i + 1));
    }
    await outboxEmpty(db);
    expect(await urlStatus(db, url.id)).toBe('alive');
    const outcomes = await db.kysely.selectFrom('webhook_attempts').select(['outcome']).where('url_id', '=', url.id).execute();
    expect(outcomes.filter((o) => o.outcome === 'expired')).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'delivered')).toHaveLength(5);
    expect(dispatcher.stats.expired).toBe(1);
  });
});
