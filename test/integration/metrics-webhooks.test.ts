import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { type MetricHistogram, registerMetrics } from '../../src/http/metrics.js';
import { EXACT_OUTBOX_COUNT, readOutboxBacklog } from '../../src/webhooks/outbox-backlog.js';
import { migratedDbBehindProxy } from '../support/databases.js';
import { metricValue } from '../support/metrics.js';
import type { TcpProxy } from '../support/tcp-proxy.js';

/**
 * The dispatcher's figures in /metrics: the outbox's backlog and the URLs by status, read from
 * the database at each scrape (and not shown while it is away), labelled gauges and the attempt
 * latency histogram the dispatcher keeps in milliseconds, shown in seconds.
 */

let cleanup: () => Promise<void>;
let proxy: TcpProxy;
let db: Db;
let app: FastifyInstance;
let inFlight: Record<string, number> | null = { first: 3, retry: 1 };
const latency = { bucketsMs: [5, 10, 25], counts: [2, 3, 3, 4], sum: 1234, count: 4 };

beforeAll(async () => {
  ({ db, proxy, cleanup } = await migratedDbBehindProxy());
  app = Fastify();
  const histogram: MetricHistogram = { name: 'mailtally_test_attempt_duration_seconds', help: 'attempts', read: () => latency };
  registerMetrics(app, {
    db: db.kysely,
    gauges: [{ name: 'mailtally_test_in_flight', help: 'in flight', label: 'lane', read: () => inFlight }],
    histograms: [histogram],
    outbox: readOutboxBacklog,
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await cleanup?.();
});

const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;
const line = metricValue;

async function addUrl(apiKeyId: number, eventType: string, status: 'alive' | 'dead'): Promise<number> {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO callback_urls (api_key_id, event_type, status, url, secret)
    VALUES (${apiKeyId}, ${eventType}, ${status}, 'https://hooks.example.com/in', 'secret') RETURNING id`.execute(db.kysely);
  return Number(rows[0]?.id);
}

async function enqueue(urlId: number, count: number, ageSeconds: number): Promise<void> {
  await sql`
    INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, created_at)
    SELECT 1, ${urlId}, 'msg_' || ${urlId} || '_' || g, ARRAY['{}'], ARRAY[g::bigint], 2, now() - make_interval(secs => ${ageSeconds})
    FROM generate_series(1, ${count}) AS g`.execute(db.kysely);
}

describe('the dispatcher in /metrics', () => {
  it('shows the outbox and the URLs as the database holds them, and nothing of them while it is away', { timeout: 60_000 }, async () => {
    let text = await scrape();
    expect(line(text, 'mailtally_webhook_outbox_deliveries')).toBe('0');
    expect(line(text, 'mailtally_webhook_outbox_oldest_seconds')).toBe('0');
    expect(line(text, 'mailtally_webhook_urls{status="alive"}')).toBe('0');

    const alive = await addUrl(1, 'open', 'alive');
    await addUrl(1, 'click', 'alive');
    const dead = await addUrl(2, 'open', 'dead');
    await enqueue(alive, 3, 5);
    await enqueue(dead, 2, 600);
    text = await scrape();
    expect(line(text, 'mailtally_webhook_outbox_deliveries')).toBe('5');
    const oldest = Number(line(text, 'mailtally_webhook_outbox_oldest_seconds'));
    // The age of the first row in (5 s): rows go in in time order, and it is found by its key.
    expect(oldest).toBeGreaterThanOrEqual(5);
    expect(oldest).toBeLessThan(60);
    expect(line(text, 'mailtally_webhook_urls{status="alive"}')).toBe('2');
    expect(line(text, 'mailtally_webhook_urls{status="dead"}')).toBe('1');

    await proxy.cut();
    try {
      text = await scrape();
      expect(text).toMatch(/^mailtally_database_up 0$/m);
      expect(line(text, 'mailtally_webhook_outbox_deliveries')).toBeUndefined();
      expect(line(text, 'mailtally_webhook_urls{status="alive"}')).toBeUndefined();
    } finally {
      await proxy.restore();
    }
    expect(line(await scrape(), 'mailtally_webhook_outbox_deliveries')).toBe('5');
  });

  it('gives the oldest waiting delivery its age, by the order rows went in', async () => {
    await sql`DELETE FROM webhook_deliveries`.execute(db.kysely);
    const url = await addUrl(3, 'sent', 'alive');
    await enqueue(url, 1, 900);
    await enqueue(url, 1, 10);
    const oldest = Number(line(await scrape(), 'mailtally_webhook_outbox_oldest_seconds'));
    expect(oldest).toBeGreaterThanOrEqual(900);
    expect(oldest).toBeLessThan(960);
  });

  it('counts past EXACT_OUTBOX_COUNT by Postgres`s estimate, never below the rows it counted', { timeout: 60_000 }, async () => {
    await sql`DELETE FROM webhook_deliveries`.execute(db.kysely);
    const url = await addUrl(4, 'sent', 'alive');
    await enqueue(url, EXACT_OUTBOX_COUNT + 500, 1);
    await sql`ANALYZE webhook_deliveries`.execute(db.kysely);
    const backlog = await readOutboxBacklog(db.kysely);
    expect(backlog.exact).toBe(false);
    expect(backlog.deliveries).toBeGreaterThan(EXACT_OUTBOX_COUNT);
    expect(Math.abs(backlog.deliveries - (EXACT_OUTBOX_COUNT + 500))).toBeLessThan(5000);
    await sql`DELETE FROM webhook_deliveries`.execute(db.kysely);
    expect((await readOutboxBacklog(db.kysely)).exact).toBe(true);
  });

  it('shows a labelled gauge per label value, none while it reads null, and a kept histogram in seconds', async () => {
    let text = await scrape();
    expect(line(text, 'mailtally_test_in_flight{lane="first"}')).toBe('3');
    expect(line(text, 'mailtally_test_in_flight{lane="retry"}')).toBe('1');
    inFlight = null;
    text = await scrape();
    expect(text).toMatch(/^# TYPE mailtally_test_in_flight gauge$/m);
    expect(line(text, 'mailtally_test_in_flight{lane="first"}')).toBeUndefined();
    inFlight = { first: 0, retry: 7 };

    expect(text).toMatch(/^# TYPE mailtally_test_attempt_duration_seconds histogram$/m);
    expect(line(text, 'mailtally_test_attempt_duration_seconds_bucket{le="0.005"}')).toBe('2');
    expect(line(text, 'mailtally_test_attempt_duration_seconds_bucket{le="0.01"}')).toBe('3');
    expect(line(text, 'mailtally_test_attempt_duration_seconds_bucket{le="0.025"}')).toBe('3');
    expect(line(text, 'mailtally_test_attempt_duration_seconds_bucket{le="+Inf"}')).toBe('4');
    expect(line(text, 'mailtally_test_attempt_duration_seconds_sum')).toBe('1.234');
    expect(line(text, 'mailtally_test_attempt_duration_seconds_count')).toBe('4');

    latency.counts[3] = 9;
    latency.count = 9;
    text = await scrape();
    expect(line(text, 'mailtally_test_attempt_duration_seconds_bucket{le="+Inf"}')).toBe('9');
    expect(line(text, 'mailtally_test_in_flight{lane="retry"}')).toBe('7');
  });
});
