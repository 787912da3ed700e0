import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_TENANTS } from '../../bench/support/generate.js';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { WEBHOOK_EVENT_TYPES } from '../../src/events/schema.js';
import { type CreatedApiKey, createApiKey } from '../../src/keys/key-store.js';
import { replay } from '../../src/projector/replay.js';
import { WEBHOOKS_CHECKPOINT } from '../../src/webhooks/fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT } from '../../src/webhooks/first-attempts-ledger.js';
import { basicAuth } from '../support/api.js';
import { ApiProbe, type ProbeTarget, fiveHundredsOutside } from '../support/api-probe.js';
import { faultStream } from '../support/fault-events.js';
import { FaultSchedule } from '../support/fault-schedule.js';
import { waitFor } from '../support/harness.js';
import { openJetStream } from '../support/jetstream.js';
import { publishPaced } from '../support/paced-publisher.js';
import { PrivateNats } from '../support/private-nats.js';
import { PrivatePostgres } from '../support/private-postgres.js';
import { freePort, sleep } from '../support/processes.js';
import { type RoleName, RoleProcesses } from '../support/role-processes.js';
import { type Accepted, SwitchableReceiver, webhookLedger } from '../support/webhook-ledger.js';

/**
 * The assembled service under faults: each role in its own process against a Postgres and a
 * NATS of this test's own, a seeded stream of events (every type, six tenants, repeats, out of
 * order, some without EventID or Nats-Msg-Id) published while a client loop reads the API and
 * receivers take webhooks (one of them failing for a while). Meanwhile, at seeded-random
 * moments, every role is SIGKILLed and restarted, Postgres is stopped (fast and immediate) and
 * started, NATS is killed and restarted on its store. Once everything caught up: the log holds
 * each distinct event exactly once, every read model equals a clean replay, every webhook
 * reached its URL (or was given up by the retry policy), the API answered no 5xx while Postgres
 * was up, and every process stayed under the memory bound.
 *
 * `npm run test:faults` (FAULTS_EVENTS, default 200,000; FAULTS_SEED; FAULTS_PUBLISH_SECONDS).
 */

const EVENTS = Number(process.env['FAULTS_EVENTS'] ?? 200_000);
const SEED = Number(process.env['FAULTS_SEED'] ?? 20_261_124);
const PUBLISH_SECONDS = Number(process.env['FAULTS_PUBLISH_SECONDS'] ?? Math.min(300, Math.max(30, Math.round(EVENTS / 2500))));
const RSS_LIMIT = Number(process.env['FAULTS_RSS_LIMIT_MB'] ?? 1024) * 1024 * 1024;
/** After Postgres is back, how long its clients may take to notice (the windows' tail). */
const GRACE_MS = 2000;
/** Every reader of the log whose checkpoint must reach the head once all is caught up. */
const READERS = [...PROJECTIONS.map((p) => p.name), WEBHOOKS_CHECKPOINT, FIRST_ATTEMPTS_CHECKPOINT];
const CATCH_UP_MS = Math.max(180_000, EVENTS * 3);
const LOG_DIR = process.env['FAULTS_LOG_DIR'] ?? join(tmpdir(), `mailtally-faults-${process.pid}`);

const say = (line: string) => console.log(`[faults] ${line}`);
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
});

describe('the assembled service under faults', () => {
  it(`${EVENTS} events through killed roles, Postgres and NATS restarts: exactly once, replay-equal, webhooks delivered`, { timeout: 3_600_000 }, async () => {
    const began = Date.now();
    const postgres = await PrivatePostgres.create();
    cleanups.push(() => postgres.destroy());
    const nats = await PrivateNats.create();
    cleanups.push(() => nats.destroy());

    const admin = await connectDb({ kind: 'postgres', url: postgres.url(), poolSize: 2 });
    await sql`CREATE DATABASE mailtally`.execute(admin.kysely);
    await admin.close();
    const databaseUrl = postgres.url('mailtally');
    const db: Db = await connectDb({ kind: 'postgres', url: databaseUrl, poolSize: 4 });
    cleanups.push(() => db.close());
    await migrateToLatest(db.kysely);
    const keys: CreatedApiKey[] = [];
    for (let i = 0; i < DEFAULT_TENANTS.length; i++) keys.push(await createApiKey(db.kysely));
    const tenants = keys.map((k) => k.APIKeyID);

    const apiPort = await freePort();
    const base = {
      DATABASE_URL: databaseUrl,
      NATS_URL: nats.url,
      PG_POOL_SIZE: '8',
      INGEST_ACK_WAIT_MS: '10000',
      PROJECTOR_LEASE_MS: '2000',
      PROJECTOR_POLL_MS: '250',
      WEBHOOK_ALLOWLIST: '127.0.0.1/32',
      WEBHOOK_RETRY_SCHEDULE: '0.5,1,2,4,8,16,30',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_LEASE_MS: '2000',
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_BATCH_WINDOW_MS: '200',
      API_RATE_LIMIT: '0',
    };
    const roles = new RoleProcesses((role: RoleName) => ({ ...base, PORT: role === 'api' ? String(apiPort) : '0' }));
    cleanups.push(async () => {
      await roles.stopAll(3000);
      roles.writeLogs(LOG_DIR);
    });
    // Should the runner die, leave no server or role behind.
    process.once('exit', () => {
      roles.killNow();
      nats.killNow();
      postgres.destroy();
    });
    roles.sampleRss();
    for (const role of ['ingest', 'projector', 'dispatcher', 'api'] as const) await roles.start(role);
    const apiUrl = `http://127.0.0.1:${apiPort}`;

    // Webhooks: Version 2 for tenants 0, 2, 4 and Version 1 for 1, 3, 5, every type; tenants 0
    // and 1 go to the receiver that fails for a while.
    const accepted: Accepted[] = [];
    const healthy = await SwitchableReceiver.start(accepted);
    const flaky = await SwitchableReceiver.start(accepted);
    cleanups.push(() => healthy.close(), () => flaky.close());
    const urls = tenants.map((tenant, i) => ({ tenant, version: (i % 2 === 0 ? 2 : 1) as 1 | 2 }));
    for (const [i, key] of keys.entries()) {
      for (const type of WEBHOOK_EVENT_TYPES) {
        const receiver = i < 2 ? flaky : healthy;
        const res = await fetch(`${apiUrl}/v3/REST/eventcallbackurl`, {
          method: 'POST',
          headers: { authorization: basicAuth(key), 'content-type': 'application/json' },
          body: JSON.stringify({ EventType: type, Url: receiver.url(`/t${key.APIKeyID}/${type}`), Version: urls[i]?.version }),
        });
        expect(res.status, await res.text()).toBe(201);
      }
    }

    const messages = faultStream({ count: EVENTS, seed: SEED, tenants, subjectPrefix: 'mail.events' });
    const distinct = new Set(messages.map((m) => m.key));
    say(`seed ${SEED}: ${messages.length} messages, ${distinct.size} distinct events, ${tenants.length} tenants, publishing over ~${PUBLISH_SECONDS} s`);

    const probe = new ApiProbe(apiUrl, probeTargets(keys), { concurrency: 4 });
    probe.start();
    const schedule = new FaultSchedule(SEED, Math.max(1, Math.round(PUBLISH_SECONDS / 40)), messages.length, Number(base.PROJECTOR_LEASE_MS));
    const progress = { started: 0 };
    const publishing = publishPaced(nats.url, messages, { ratePerSecond: messages.length / PUBLISH_SECONDS, gate: (i) => schedule.gate(i), progress });
    const receiverFaults = (async () => {
      while (progress.started < messages.length / 4) await sleep(50);
      // Failing for at least 5 s and 50 answers (however slowly deliveries come), then refusing connections.
      await flaky.setMode('fail');
      const failFrom = Date.now();
      while (Date.now() - failFrom < 5000 || (flaky.failed < 50 && Date.now() - failFrom < 120_000)) await sleep(100);
      say(`flaky receiver: ${flaky.failed} answers 500 in ${((Date.now() - failFrom) / 1000).toFixed(1)} s, now refusing connections for 5 s`);
      await flaky.setMode('down');
      await sleep(5000);
      await flaky.setMode('ok');
    })();
    const faults = schedule.run({ roles, postgres, nats }, () => progress.started, GRACE_MS, say);
    const [published] = await Promise.all([publishing, faults, receiverFaults]);
    say(`published in ${(published.ms / 1000).toFixed(1)} s (${published.retries} publishes retried, ${published.duplicateAcks} duplicate acks)`);

    // Catch-up: every distinct event in the log, every reader at the head, the outbox empty.
    const caughtUpFrom = Date.now();
    // Every message taken (acked or dead-lettered) by ingest; then the log's count is final.
    const stream = await openJetStream(nats.url);
    cleanups.push(() => stream.close());
    await waitFor('the ingest consumer to have acked every message', async () => {
      const info = await stream.jsm.consumers.info('MAIL_EVENTS', 'mailtally-ingest').catch(() => null);
      return info !== null && info.num_pending === 0 && info.num_ack_pending === 0;
    }, CATCH_UP_MS, 500);
    await waitFor('every checkpoint at the log head (GET /status)', async () => {
      const res = await fetch(`${apiUrl}/status`).catch(() => null);
      if (res?.status !== 200) return false;
      const s = (await res.json()) as { log: { head: number }; checkpoints: Record<string, { position: number }> };
      return READERS.every((n) => s.checkpoints[n]?.position === s.log.head);
    }, CATCH_UP_MS, 500);
    await waitFor('an empty webhook outbox', async () => (await count(db, 'webhook_deliveries')) === 0, CATCH_UP_MS, 500);
    say(`caught up ${((Date.now() - caughtUpFrom) / 1000).toFixed(1)} s after publishing ended`);
    await probe.stop();
    const exits = await roles.stopAll();
    roles.writeLogs(LOG_DIR);
    say(`role process logs in ${LOG_DIR}`);

    // Report.
    for (const f of schedule.done) say(`  ${f.kind.padEnd(18)} at message ${f.position} (${(f.at / 1000).toFixed(1)} s), down ${f.downMs} ms, back at ${(f.back / 1000).toFixed(1)} s`);
    say(`peak RSS: ${[...roles.peakRss].map(([r, b]) => `${r} ${(b / 1048576).toFixed(0)} MiB`).join(', ')}`);
    const statuses = new Map<string, number>();
    for (const c of probe.calls) statuses.set(String(c.status ?? c.error), (statuses.get(String(c.status ?? c.error)) ?? 0) + 1);
    say(`API calls: ${probe.calls.length} (${[...statuses].map(([s, n]) => `${s}: ${n}`).join(', ')})`);
    const refused = new Set(probe.calls.filter((c) => c.status !== null && c.status >= 400 && c.status < 500).map((c) => c.path));
    if (refused.size > 0) say(`  4xx on: ${[...refused].join(' ')}`);
    for (const w of schedule.postgresDown) {
      const inside = probe.calls.filter((c) => c.status !== null && c.status >= 500 && c.start <= w.to && c.end >= w.from).length;
      say(`  Postgres down ${new Date(w.from).toISOString()} +${((w.to - w.from) / 1000).toFixed(1)} s (grace included): ${inside} answers 5xx`);
    }
    say(`crashes: ${roles.crashes.length}; role starts: ${[...roles.starts].map(([r, n]) => `${r} ${n}`).join(', ')}`);

    // 1. The log holds each distinct event exactly once.
    const stored = await sql<{ k: string }>`SELECT api_key_id::text || ':' || event_id AS k FROM events`.execute(db.kysely);
    const storedKeys = new Set(stored.rows.map((r) => r.k));
    expect(stored.rows.length, 'rows in the log').toBe(storedKeys.size);
    const missing = [...distinct].filter((k) => !storedKeys.has(k));
    const unknown = [...storedKeys].filter((k) => !distinct.has(k));
    expect(missing.slice(0, 10), `published events missing from the log (${missing.length}, first 10)`).toEqual([]);
    expect(unknown.slice(0, 10), `log events never published (${unknown.length}, first 10)`).toEqual([]);
    expect(await count(db, 'dead_letters'), 'dead letters').toBe(0);

    // 2. Every read model equals a clean replay of the log (EXCEPT ALL both ways).
    const verified = await replay(db, PROJECTIONS, { readBatch: 50_000, catchUpBatch: 2000, mode: 'verify' });
    const differing = Object.entries(verified.differences ?? {}).filter(([, d]) => d.onlyLive + d.onlyRebuilt > 0);
    expect(differing, 'read models differing from a replay').toEqual([]);
    expect(Object.keys(verified.differences ?? {}).length).toBeGreaterThan(0);

    // 3. Every webhook-eligible event reached its URL, unless the retry policy gave it up.
    const ledger = await webhookLedger(db.kysely, urls, accepted);
    const sum = (f: (l: (typeof ledger)[number]) => number) => ledger.reduce((s, l) => s + f(l), 0);
    say(`webhooks: ${sum((l) => l.expected)} eligible, ${sum((l) => l.delivered)} delivered, ${sum((l) => l.givenUp)} given up, ${sum((l) => l.repeats)} repeated requests; flaky receiver saw ${flaky.requests.length} requests, failed ${flaky.failed}`);
    const repeated = ledger.filter((l) => l.repeats > 0).map((l) => `t${l.tenant}/${l.type} v${l.version}: ${l.repeats}`);
    if (repeated.length > 0) say(`  repeated requests by URL: ${repeated.join(', ')}`);
    const givenUp = await sql<Record<string, unknown>>`
      SELECT a.webhook_id, a.url_id::text AS url_id, a.attempt, a.outcome, a.status_code, a.error_class, a.attempted_at::text AS at,
             (SELECT count(*)::int FROM webhook_attempts b WHERE b.webhook_id = a.webhook_id AND b.outcome = 'delivered') AS delivered_attempts
      FROM webhook_attempts a WHERE a.outcome IN ('expired', 'dropped') ORDER BY a.id LIMIT 10`.execute(db.kysely);
    for (const g of givenUp.rows) say(`  given up: ${JSON.stringify(g)}`);
    expect(ledger.filter((l) => l.missing > l.givenUp || l.foreign > 0), 'URLs missing events or given foreign ones').toEqual([]);
    expect(sum((l) => l.expected)).toBeGreaterThan(0);
    expect(flaky.failed, 'requests the flaky receiver failed (the retry path was taken)').toBeGreaterThanOrEqual(50);

    // 4. No 5xx outside the windows when Postgres was down; the API did answer.
    expect(fiveHundredsOutside(probe.calls, schedule.postgresDown).slice(0, 10), '5xx while Postgres was up').toEqual([]);
    // While it was down, the answer says so: 503 (retry shortly), never 500 (a fault of ours).
    expect(probe.calls.filter((c) => c.status !== null && c.status >= 500 && c.status !== 503).slice(0, 10), '5xx other than 503').toEqual([]);
    expect(probe.calls.filter((c) => c.status === 200).length).toBeGreaterThan(0);

    // 5. Memory stayed bounded; no role crashed on its own; a SIGTERM stops each one cleanly.
    expect([...roles.peakRss].filter(([, b]) => b > RSS_LIMIT), `roles above ${RSS_LIMIT / 1048576} MiB`).toEqual([]);
    expect(roles.crashes.map((c) => `${c.role} ${JSON.stringify(c.exit)}\n${c.output}`), 'roles that exited unasked').toEqual([]);
    expect([...exits].filter(([, e]) => e.code !== 0), 'roles not exiting 0 on SIGTERM').toEqual([]);
    expect(schedule.done.length).toBe(schedule.plan.length);
    say(`done in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });
});

async function count(db: Db, table: 'events' | 'dead_letters' | 'webhook_deliveries'): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM ${sql.table(table)}`.execute(db.kysely);
  return Number(rows[0]?.n ?? 0);
}

/** What a dashboard would call, per tenant: counters, campaigns, message events, webhooks. */
function probeTargets(keys: readonly CreatedApiKey[]): ProbeTarget[] {
  const from = Date.UTC(2026, 9, 25) / 1000;
  const to = Date.UTC(2026, 11, 1) / 1000;
  const paths = [
    '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime',
    `/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Event&CounterResolution=Day&FromTS=${from}&ToTS=${to}&Limit=40`,
    '/v3/REST/campaignoverview?Limit=20',
    '/v3/REST/clickstatistics?Limit=50',
    '/v3/REST/bouncestatistics?Limit=50',
    '/v3/REST/openinformation?Limit=50',
    '/v3/REST/geostatistics',
    '/v3/REST/useragentstatistics?Limit=20',
    '/v3/REST/statistics/recipient-esp?CampaignID=7100013',
    '/v3/REST/toplinkclicked?CampaignID=7100013',
    '/v3/REST/message?Limit=20&Sort=ArrivedAt+DESC',
    '/v3/REST/contactstatistics?Limit=20',
    '/v3/REST/eventcallbackurl',
  ];
  return [...keys.flatMap((k) => paths.map((path) => ({ path, authorization: basicAuth(k) }))), { path: '/status' }];
}
