import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RETRY_DELAY_SECONDS } from '../../../src/config.js';
import type { Db } from '../../../src/db/connect.js';
import { emptyStats } from '../../../src/webhooks/dispatcher-stats.js';
import type { HttpOutcome } from '../../../src/webhooks/http-delivery.js';
import { type ClaimedDelivery, claimDue, insertDeliveries } from '../../../src/webhooks/outbox.js';
import { OutcomeWriter } from '../../../src/webhooks/outcome-writer.js';
import { openMigratedDb } from '../../support/databases.js';
import { quietLogger } from '../../support/harness.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { append } from '../../support/projections.js';
import { waitFor } from '../../support/harness.js';
import { hook, startDispatcher, urlStatus } from './fixture.js';

/**
 * The outcome writer acts only on rows whose claim it still holds: a worker whose lease ran out
 * while its request was in flight (frozen, or waiting out a database outage) records its attempt
 * as what it was, and leaves the decisions — expiring the delivery, killing the URL — to the
 * row's new holder. Retry delays as long as the configuration allows are written; a result the
 * database refuses as data holds back no other outcome. A stopped dispatcher's writer stops
 * trying; what it could not write is sent again later.
 */

const SCHEDULE = [0.05];
const FAILED: HttpOutcome = { ok: false, statusCode: 500, latencyMs: 3, errorClass: 'http_status', snippet: null, retryAfterMs: null };

let db: Db;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
});
afterAll(async () => {
  await cleanup?.();
});

/** One delivery to a fresh URL, claimed by `claim`, already at its last retry. */
async function lastTry(tenant: string, claim: string): Promise<ClaimedDelivery> {
  const url = await hook(db, tenant, { EventType: 'sent', Url: `http://127.0.0.1:9/hook/${tenant}` });
  await insertDeliveries(db.kysely, [{ apiKeyId: BigInt(tenant), urlId: url.id, webhookId: `msg_${tenant}`, events: ['{"event":"sent"}'], positions: [1n], bytes: 16, delayMs: 0 }]);
  await db.kysely.updateTable('webhook_deliveries').set({ attempts: SCHEDULE.length }).where('url_id', '=', url.id).execute();
  const [row] = await claimDue(db.kysely, { retry: false, limit: 10, perUrl: 10, room: new Map(), after: url.id - 1n, leaseMs: 1, claim });
  if (row === undefined || row.urlId !== url.id) throw new Error('the delivery was not claimed');
  return row;
}

async function write(delivery: ClaimedDelivery) {
  const stats = emptyStats({ held: false, position: '0', batches: 0, eventsRead: 0, eventsEnqueued: 0, deliveriesEnqueued: 0, recovered: 0, paced: 0, errors: 0 });
  const writer = new OutcomeWriter(db.kysely, { retryScheduleSeconds: SCHEDULE, maxBatch: 10, lingerMs: 1 }, stats, quietLogger(), () => undefined);
  await writer.write([{ delivery, http: FAILED, attemptedAt: new Date(Date.now() - 1000) }]);
  const attempts = await db.kysely.selectFrom('webhook_attempts').select(['outcome']).where('url_id', '=', delivery.urlId).execute();
  const pending = await db.kysely.selectFrom('webhook_deliveries').select(['claim']).where('id', '=', delivery.id).execute();
  return { stats, outcomes: attempts.map((a) => a.outcome), pending: pending.map((p) => p.claim), status: await urlStatus(db, delivery.urlId) };
}

describe('webhook outcomes and claims', () => {
  it('the claim holder out of retries kills a URL that never worked (its row goes to the reroute)', async () => {
    const r = await write(await lastTry('41', 'worker-a'));
    expect(r.outcomes).toEqual(['failed']);
    expect(r.pending).toEqual([null]);
    expect(r.status).toBe('dead');
    expect(r.stats.urlsDied).toBe(1);
  });

  it('the claim holder out of retries expires the delivery alone when its URL worked since', async () => {
    const d = await lastTry('43', 'worker-a');
    await db.kysely.updateTable('callback_urls').set({ last_success_at: new Date() }).where('id', '=', d.urlId).execute();
    const r = await write(d);
    expect(r.outcomes).toEqual(['expired']);
    expect(r.pending).toEqual([]);
    expect(r.status).toBe('alive');
    expect(r.stats.expired).toBe(1);
  });

  it('a worker whose claim was taken over records a failed attempt and changes nothing else', async () => {
    const stale = await lastTry('42', 'worker-a');
    // Its lease ran out and another worker claimed the row.
    await db.kysely.updateTable('webhook_deliveries').set({ claim: 'worker-b' }).where('id', '=', stale.id).execute();
    const r = await write(stale);
    expect(r.outcomes).toEqual(['failed']);
    expect(r.pending).toEqual(['worker-b']);
    expect(r.status).toBe('alive');
    expect(r.stats.expired + r.stats.urlsDied).toBe(0);
    expect(r.stats.failedAttempts).toBe(1);
  });
});

describe('outcomes the database could refuse', () => {
  const newStats = () => emptyStats({ held: false, position: '0', batches: 0, eventsRead: 0, eventsEnqueued: 0, deliveriesEnqueued: 0, recovered: 0, paced: 0, errors: 0 });

  /** A delivery of a fresh URL claimed with its first attempt to come; `direct`: sent straight from the log instead (no outbox row). */
  async function firstTry(tenant: string, direct: boolean): Promise<ClaimedDelivery> {
    const url = await hook(db, tenant, { EventType: 'sent', Url: `http://127.0.0.1:9/hook/${tenant}` });
    await insertDeliveries(db.kysely, [{ apiKeyId: BigInt(tenant), urlId: url.id, webhookId: `msg_${tenant}`, events: ['{"event":"sent"}'], positions: [1n], bytes: 16, delayMs: 0 }]);
    const [row] = await claimDue(db.kysely, { retry: false, limit: 10, perUrl: 10, room: new Map(), after: url.id - 1n, leaseMs: 60_000, claim: `w-${tenant}` });
    if (row === undefined || row.urlId !== url.id) throw new Error('the delivery was not claimed');
    if (!direct) return row;
    await db.kysely.deleteFrom('webhook_deliveries').where('id', '=', row.id).execute();
    return { ...row, id: 0n, direct: BigInt(tenant), claim: '' };
  }

  it('writes the longest retry delay the configuration allows, with a Retry-After stretching it (past 2^31 ms)', async () => {
    const outbox = await firstTry('51', false);
    const direct = await firstTry('52', true);
    const writer = new OutcomeWriter(db.kysely, { retryScheduleSeconds: [MAX_RETRY_DELAY_SECONDS], maxBatch: 10, lingerMs: 1 }, newStats(), quietLogger(), () => undefined);
    const http: HttpOutcome = { ...FAILED, statusCode: 503, retryAfterMs: 10 ** 12 };
    await writer.write([{ delivery: outbox, http, attemptedAt: new Date() }, { delivery: direct, http, attemptedAt: new Date() }]);
    const due = await sql<{ url_id: string; days: number }>`
      SELECT url_id::text, extract(epoch FROM due_at - now()) / 86400 AS days FROM webhook_deliveries WHERE url_id IN (${outbox.urlId}, ${direct.urlId}) AND retry ORDER BY url_id`.execute(db.kysely);
    expect(due.rows.map((r) => r.url_id)).toEqual([String(outbox.urlId), String(direct.urlId)]);
    for (const r of due.rows) expect(Number(r.days)).toBeGreaterThan(30);
  });

  it('remembers a bounded number of URLs, and a URL forgotten after a failure has its next success written', async () => {
    const writer = new OutcomeWriter(db.kysely, { retryScheduleSeconds: [60], maxBatch: 10, lingerMs: 1, maxRememberedUrls: 3 }, newStats(), quietLogger(), () => undefined);
    const OK: HttpOutcome = { ...FAILED, ok: true, statusCode: 200, errorClass: null };
    // Direct first attempts at log positions no event has (a later test's events must not look handled).
    const direct = async (tenant: string, n = tenant) => ({ ...(await firstTry(tenant, true)), direct: 900_000_000_000n + BigInt(n), webhookId: `msg_${900_000_000_000n + BigInt(n)}` });
    const failing = await direct('55');
    await writer.write([{ delivery: failing, http: FAILED, attemptedAt: new Date() }]);
    expect(writer.rememberedUrls).toBe(1);
    for (const tenant of ['56', '57']) await writer.write([{ delivery: await direct(tenant), http: OK, attemptedAt: new Date() }]);
    expect(writer.rememberedUrls).toBe(3);
    // A fourth: past the bound, all are forgotten.
    await writer.write([{ delivery: await direct('58'), http: OK, attemptedAt: new Date() }]);
    expect(writer.rememberedUrls).toBe(0);
    // The URL that failed now answers: its success is written, clearing its failure.
    const before = await db.kysely.selectFrom('callback_urls').select(['failing_since']).where('id', '=', failing.urlId).executeTakeFirstOrThrow();
    expect(before.failing_since).not.toBeNull();
    await writer.write([{ delivery: { ...failing, direct: 900_000_000_059n, webhookId: 'msg_900000000059' }, http: OK, attemptedAt: new Date() }]);
    const after = await db.kysely.selectFrom('callback_urls').select(['failing_since', 'last_success_at']).where('id', '=', failing.urlId).executeTakeFirstOrThrow();
    expect(after.failing_since).toBeNull();
    expect(after.last_success_at).not.toBeNull();
  });

  it('a result the database refuses as data is dropped alone; the others are written', async () => {
    const poison = await firstTry('53', false);
    const good = await firstTry('54', false);
    const writer = new OutcomeWriter(db.kysely, { retryScheduleSeconds: [1], maxBatch: 10, lingerMs: 1 }, newStats(), quietLogger(), () => undefined);
    // A status code past the integer column's range: the whole batch's insert is refused (22003).
    writer.push({ delivery: poison, http: { ...FAILED, statusCode: 2 ** 31 }, attemptedAt: new Date() });
    writer.push({ delivery: good, http: { ...FAILED, statusCode: 200, ok: true, errorClass: null }, attemptedAt: new Date() });
    const drained = await Promise.race([writer.drain().then(() => 'drained'), sleep(10_000).then(() => 'still retrying after 10 s')]);
    expect(drained).toBe('drained');
    const attempts = await db.kysely.selectFrom('webhook_attempts').select(['url_id', 'outcome']).where('url_id', 'in', [poison.urlId, good.urlId]).execute();
    expect(attempts).toEqual([{ url_id: good.urlId, outcome: 'delivered' }]);
    // The refused one's row stays claimed, to be sent again when its lease ends.
    const left = await db.kysely.selectFrom('webhook_deliveries').select(['url_id', 'claim']).where('url_id', 'in', [poison.urlId, good.urlId]).execute();
    expect(left).toEqual([{ url_id: poison.urlId, claim: poison.claim }]);
  });
});

describe('a stopped dispatcher', () => {
  const ids: string[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    ids.push(String(req.headers['webhook-id']));
    req.resume().on('end', () => held.push(res));
  });
  const answer = () => held.splice(0).forEach((res) => res.writeHead(200, { 'content-length': '2' }).end('ok'));
  beforeAll(() => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)));
  afterAll(async () => {
    answer();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('writes no outcome after its stop; the first attempt whose outcome it could not write is sent again by the next one', async () => {
    const url = await hook(db, '61', { EventType: 'open', Url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/stop` });
    const attemptsOfUrl = async () =>
      Number((await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_attempts WHERE url_id = ${url.id}`.execute(db.kysely)).rows[0]?.n);
    const first = await startDispatcher(db, { drainMs: 300 });
    await append(db, '61', [{ event: 'open', time: 1_433_334_000, MessageID: '6100', email: 'stop@example.com', EventID: 'stop-1' }]);
    await waitFor('the request at the receiver', async () => held.length === 1);
    // The outcome cannot be written (its table is away) until after the stop.
    await sql`ALTER TABLE webhook_attempts RENAME TO webhook_attempts_away`.execute(db.kysely);
    answer();
    await first.stop();
    await sql`ALTER TABLE webhook_attempts_away RENAME TO webhook_attempts`.execute(db.kysely);
    // The writer of the code before went on retrying, and wrote it a moment later.
    const late = await waitFor('an outcome written after the stop', async () => (await attemptsOfUrl()) > 0, 3000).then(
      () => true,
      () => false,
    );
    expect(late).toBe(false);

    const second = await startDispatcher(db);
    try {
      await waitFor('the request sent again', async () => held.length === 1);
      answer();
      // (The outbox holds the tests' rows above: the attempt row is what tells.)
      await waitFor('the outcome written', async () => (await attemptsOfUrl()) === 1);
      expect(ids).toHaveLength(2);
      expect(ids[1]).toBe(ids[0]);
      expect(await attemptsOfUrl()).toBe(1);
    } finally {
      await second.stop();
    }
  });
});
