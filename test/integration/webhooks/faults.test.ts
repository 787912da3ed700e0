import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { openMigratedDb } from '../../support/databases.js';
import { waitFor } from '../../support/harness.js';
import { freePort } from '../../support/processes.js';
import { append } from '../../support/projections.js';
import { type Received, type Reply, WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * Receivers that misbehave — failing half the time, down for a while, hanging, streaming
 * without end — against the real dispatcher on Postgres: every event still arrives (each
 * answered 200 exactly once), and a hanging endpoint costs a healthy one nothing noticeable.
 */

let db: Db;
let cleanup: () => Promise<void>;
const receivers: WebhookReceiver[] = [];
let dispatcher: Dispatcher | null = null;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
});
afterEach(async () => {
  await dispatcher?.stop();
  dispatcher = null;
  for (const r of receivers.splice(0)) await r.close();
});
afterAll(async () => cleanup?.());

const opens = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ event: 'open', time: 1_700_000_000 + i, MessageID: String(19_421_777_835_146_490n + BigInt(i)), email: `r${i}@example.com`, EventID: `${prefix}-${i}` }));

/** A receiver that also remembers what it answered to each webhook id. */
async function receiver(decide: (r: Received, n: number) => Reply, port = 0): Promise<{ r: WebhookReceiver; answers: Map<string, number[]> }> {
  const answers = new Map<string, number[]>();
  const r = await WebhookReceiver.start((req, n) => {
    const reply = decide(req, n);
    const status = 'status' in reply ? reply.status : 0;
    answers.set(req.webhookId, [...(answers.get(req.webhookId) ?? []), status]);
    return reply;
  }, port);
  receivers.push(r);
  return { r, answers };
}

/** Each id answered 200 exactly once. */
function deliveredOnce(answers: Map<string, number[]>): string[] {
  return [...answers].filter(([, statuses]) => statuses.filter((s) => s === 200).length === 1).map(([id]) => id);
}

async function attemptStats(urlId: bigint): Promise<Record<string, number>> {
  const rows = await db.kysely
    .selectFrom('webhook_attempts')
    .select(['outcome', (eb) => eb.fn.countAll<string>().as('n')])
    .where('url_id', '=', urlId)
    .groupBy('outcome')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.outcome, Number(r.n)]));
}

describe('faulty receivers', () => {
  it('a receiver answering 500 half the time gets every event, each 200 exactly once', async () => {
    let seed = 42;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const { r, answers } = await receiver(() => (random() < 0.5 ? { status: 500, body: 'oops' } : { status: 200 }));
    const url = await hook(db, '11', { EventType: 'open', Url: r.url('/flaky') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: Array.from({ length: 40 }, () => 0.02) });
    await append(db, '11', opens('flaky', 200));
    await waitFor('every event answered 200', async () => deliveredOnce(answers).length === 200, 60_000);
    await outboxEmpty(db);
    expect(deliveredOnce(answers)).toHaveLength(200);
    expect(answers.size).toBe(200);
    const stats = await attemptStats(url.id);
    expect(stats['delivered']).toBe(200);
    expect(stats['failed']).toBeGreaterThan(50);
    expect(dispatcher.stats).toMatchObject({ delivered: 200, deliveredEvents: 200, expired: 0 });
  });

  it('a receiver down for a while, then back, gets everything sent meanwhile', async () => {
    const port = await freePort();
    const url = await hook(db, '12', { EventType: 'open', Url: `http://127.0.0.1:${port}/later` });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: Array.from({ length: 200 }, () => 0.1) });
    await append(db, '12', opens('down', 50));
    await waitFor('refused attempts', async () => {
      const n = await db.kysely.selectFrom('webhook_attempts').select((eb) => eb.fn.countAll<string>().as('n')).where('url_id', '=', url.id).where('error_class', '=', 'connect_refused').executeTakeFirstOrThrow();
      return Number(n.n) >= 100;
    });
    const { answers } = await receiver(() => ({ status: 200 }), port);
    await waitFor('all 50 delivered', async () => deliveredOnce(answers).length === 50, 30_000);
    await outboxEmpty(db);
    expect(answers.size).toBe(50);
    expect((await attemptStats(url.id))['delivered']).toBe(50);
  });

  it('an endless body is read through its cap: 200s are delivered, 500s retried, snippets short', async () => {
    const { r, answers } = await receiver((req) => ({ status: req.path === '/endless-ok' ? 200 : 500, endless: true }));
    const good = await hook(db, '13', { EventType: 'open', Url: r.url('/endless-ok') });
    const bad = await hook(db, '14', { EventType: 'open', Url: r.url('/endless-fail') });
    dispatcher = await startDispatcher(db, { retryScheduleSeconds: [0.05, 0.05] });
    await append(db, '13', opens('endless-ok', 5));
    await append(db, '14', opens('endless-fail', 5));
    await outboxEmpty(db);
    expect(deliveredOnce(answers).filter((id) => answers.get(id)?.includes(200))).toHaveLength(5);
    const rows = await db.kysely.selectFrom('webhook_attempts').select(['url_id', 'outcome', 'status_code', 'error_class', 'response_snippet']).where('url_id', 'in', [good.id, bad.id]).execute();
    expect(rows.filter((x) => x.url_id === good.id).map((x) => x.outcome)).toEqual(Array(5).fill('delivered'));
    const tried = rows.filter((x) => x.url_id === bad.id && x.outcome !== 'dropped');
    expect(tried.length).toBeGreaterThanOrEqual(5);
    expect(tried.every((x) => x.status_code === 500 && x.error_class === 'http_status')).toBe(true);
    expect([...rows.filter((x) => x.url_id === good.id), ...tried].every((x) => (x.response_snippet ?? '').length === 4096 && /^x+$/.test(x.response_snippet ?? ''))).toBe(true);
  });
});

/** The most requests of `reqs` in flight at once, each taken as answered `answerMs` after it arrived, counting those arriving from `from` on. */
function mostInFlight(reqs: readonly Received[], answerMs: number, from: number): number {
  const times = reqs.map((x) => x.at).sort((a, b) => a - b);
  let most = 0;
  for (const t of times) if (t >= from) most = Math.max(most, times.filter((u) => u > t - answerMs && u <= t).length);
  return most;
}

describe('isolation', () => {
  it.each([true, false])('a throttling endpoint (503) is sent fewer requests at a time, a steady one keeps its cap (adaptive: %s)', async (adaptive) => {
    const ANSWER_MS = 150;
    const { r } = await receiver((req) => ({ status: req.path.startsWith('/busy') ? 503 : 200, delayMs: ANSWER_MS }));
    const busyUrl = await hook(db, adaptive ? '31' : '33', { EventType: 'open', Url: r.url(`/busy-${adaptive}`) });
    await hook(db, adaptive ? '32' : '34', { EventType: 'open', Url: r.url(`/steady-${adaptive}`) });
    dispatcher = await startDispatcher(db, { urlConcurrency: 8, concurrency: 64, retryScheduleSeconds: [60], adaptiveConcurrency: adaptive });
    await append(db, adaptive ? '31' : '33', opens(`busy-${adaptive}`, 120));
    await append(db, adaptive ? '32' : '34', opens(`steady-${adaptive}`, 120));
    await r.waitForIds(120, `/steady-${adaptive}`);
    const busy = r.at(`/busy-${adaptive}`);
    const steady = r.at(`/steady-${adaptive}`);
    const start = Math.min(...busy.map((x) => x.at), ...steady.map((x) => x.at));
    // From four rounds on: the busy URL halved 8 → 4 → 2 → 1 (or kept 8, not adaptive).
    const settled = start + 4 * ANSWER_MS;
    expect(mostInFlight(steady, ANSWER_MS, settled)).toBeGreaterThanOrEqual(7);
    if (adaptive) expect(mostInFlight(busy, ANSWER_MS, settled)).toBeLessThanOrEqual(2);
    else expect(mostInFlight(busy, ANSWER_MS, settled)).toBeGreaterThanOrEqual(7);
    // /status counts the URLs held below their cap.
    expect(dispatcher.stats.throttledUrls.first).toBe(adaptive ? 1 : 0);
    if (!adaptive) return;
    // A URL that changed (here its address, to a receiver that keeps up; a revival or a deletion
    // alike) starts again at its cap, the 503s to requests sent before the change passed over.
    await sql`UPDATE callback_urls SET url = ${r.url('/moved')} WHERE id = ${busyUrl.id}`.execute(db.kysely);
    await waitFor('the changed URL back at its cap', async () => dispatcher?.stats.throttledUrls.first === 0 && dispatcher.stats.throttledUrls.retry === 0);
    await r.waitForIds(1, '/moved');
    await new Promise((res) => setTimeout(res, 2 * ANSWER_MS));
    expect(dispatcher.stats.throttledUrls).toMatchObject({ first: 0, retry: 0 });
  });

  it('a hanging endpoint with 10× the traffic leaves a healthy endpoint`s latency alone', async () => {
    const DEADLINE = 3000;
    const CEILING = 1000; // below one deadline: head-of-line blocking behind the hang would exceed it
    const { r } = await receiver((req) => (req.path === '/hang' ? { hang: true } : { status: 200 }));
    const hung = await hook(db, '21', { EventType: 'open', Url: r.url('/hang') });
    await hook(db, '22', { EventType: 'open', Url: r.url('/healthy') });
    dispatcher = await startDispatcher(db, { timeoutMs: DEADLINE, urlConcurrency: 4, concurrency: 16, retryScheduleSeconds: [60] });
    await append(db, '21', opens('hang', 400));
    await waitFor('the hanging endpoint to hold its slots', async () => r.at('/hang').length >= 4);

    const committed = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const [event] = opens(`healthy-${i}`, 1);
      if (event === undefined) throw new Error('unreachable');
      await append(db, '22', [event]);
      committed.set(`${event.EventID}`, performance.timeOrigin + performance.now());
      await new Promise((res) => setTimeout(res, 25));
    }
    await r.waitForIds(40, '/healthy');
    const positions = await db.kysely.selectFrom('events').select(['event_id', 'position']).where('api_key_id', '=', 22n).execute();
    const byId = new Map(positions.map((p) => [`msg_${p.position}`, p.event_id]));
    const latencies = r.at('/healthy').map((req) => req.at - (committed.get(byId.get(req.webhookId) ?? '') ?? Number.NaN));
    expect(latencies.every((l) => Number.isFinite(l))).toBe(true);
    const worst = Math.max(...latencies);
    expect(worst).toBeLessThan(CEILING);
    // Meanwhile the hanging endpoint never held more than its 4 slots: within one deadline of
    // its first request (before any slot could free), at most 4 requests reached it.
    const firstHang = Math.min(...r.at('/hang').map((x) => x.at));
    expect(r.at('/hang').filter((x) => x.at < firstHang + DEADLINE - 100).length).toBe(4);
    await waitFor('timeouts recorded', async () => ((await attemptStats(hung.id))['failed'] ?? 0) >= 4, 15_000);
    const timeouts = await db.kysely.selectFrom('webhook_attempts').select(['error_class', 'latency_ms']).where('url_id', '=', hung.id).execute();
    expect(timeouts.every((t) => t.error_class === 'timeout' && t.latency_ms >= DEADLINE - 100 && t.latency_ms < DEADLINE + 2000)).toBe(true);
  });
});
