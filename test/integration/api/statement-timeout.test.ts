import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { connectRequestPool } from '../../../src/db/connect.js';
import { createApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { replayWebhookEvents } from '../../../src/webhooks/replay-webhooks.js';
import { WEBHOOKS_CHECKPOINT } from '../../../src/webhooks/fan-out-checkpoint.js';
import { hook } from '../webhooks/fixture.js';
import { basicAuth } from '../../support/api.js';
import { sampleEvents } from '../../support/events.js';
import { type TestEnv, createTestEnv, startHttpService, waitFor } from '../../support/harness.js';
import { append, caughtUp } from '../../support/projections.js';
import { createTestDatabase } from '../../support/services.js';

/**
 * API_STATEMENT_TIMEOUT_MS on real Postgres: a request whose query waits behind a lock (an
 * operator's `LOCK TABLE`, a long migration) is cancelled by the server at the timeout and
 * answered 503 in Mailjet's error envelope — its key check too; the requests have a pool of
 * their own, so while more of them wait than the pool has connections, the projector in the
 * same process goes on folding events (before, they waited for ever and held every connection of
 * the one pool, and the projector with them); a shutdown is not held up by them; 0 is no timeout
 * at all. A webhook replay whose later batch fails says where to go on instead of failing.
 */

let t: TestEnv;
let service: Service;

beforeAll(async () => {
  t = await createTestEnv({ API_RATE_LIMIT: '0', API_CACHE_ENTRIES: '0' });
  ({ service } = await startHttpService(t, ['api', 'projector'], { API_STATEMENT_TIMEOUT_MS: '500', PG_POOL_SIZE: '2', PROJECTOR_POLL_MS: '50' }));
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

async function get(path: string, auth = basicAuth(t.key), base = service.url as string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: auth } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Runs `work` while another connection holds `table` in ACCESS EXCLUSIVE mode. */
async function whileLocked<T>(table: string, work: (locker: pg.Client) => Promise<T>): Promise<T> {
  const locker = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    return await work(locker);
  } finally {
    await locker.query('ROLLBACK').catch(() => {});
    await locker.end();
  }
}

const TIMED_OUT = { ErrorInfo: '', ErrorMessage: expect.stringContaining('took longer than this server allows'), StatusCode: 503 };
let nextMessage = 424_242;

/** While `answers` wait, the projector in the same process folds a new event; then each answer is the timeout's 503. */
async function projectorFoldsWhileTheyWait(answers: Promise<{ status: number; body: Record<string, unknown> }[]>, time: number): Promise<void> {
  await append(t.db, String(t.key.APIKeyID), sampleEvents(String(nextMessage++), time));
  await caughtUp(t.db, undefined, 15_000);
  for (const a of await answers) {
    expect(a.status).toBe(503);
    expect(a.body).toEqual(TIMED_OUT);
  }
}

describe('API requests under a statement timeout', () => {
  it('are answered 503 when their query waits past it, and leave the projector its connections', async () => {
    await whileLocked('callback_urls', async (locker) => {
      // Three times as many requests as the pool has connections, all waiting on the lock.
      const answers = Promise.all(Array.from({ length: 6 }, () => get('/v3/REST/eventcallbackurl')));
      // /metrics shows them queued for the request pool's 2 connections.
      await waitFor('requests waiting for a connection in /metrics', async () => {
        const text = await (await fetch(`${service.url as string}/metrics`)).text();
        const waiting = /mailtally_db_pool_connections\{pool="requests",state="waiting"\} (\d+)/.exec(text);
        return Number(waiting?.[1] ?? 0) >= 1 && /mailtally_db_pool_connections\{pool="main",state="total"\} [1-9]/.test(text);
      }, 2000, 20);
      await projectorFoldsWhileTheyWait(answers, 1_700_000_000);
      // The server cancelled them: nothing of the API's waits on the lock any more.
      await waitFor('no request statement waiting on the lock', async () => {
        const { rows } = await locker.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%:requests' AND wait_event_type = 'Lock'",
        );
        return rows[0]?.n === 0;
      }, 2000);
    });
    // And every connection of the request pool is back at rest.
    await waitFor('the request pool at rest', async () => {
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%:requests' AND state <> 'idle'`.execute(t.db.kysely);
      return rows[0]?.n === 0;
    }, 5000);
    const after = await get('/v3/REST/eventcallbackurl');
    expect(after.status).toBe(200);
    expect(after.body['Count']).toBe(0);
  });

  it('cancels a key check waiting behind a lock as well, and it too leaves the projector its connections', async () => {
    // Keys not checked before: no answer is cached, every request looks its key up.
    const keys = await Promise.all(Array.from({ length: 6 }, () => createApiKey(t.db.kysely)));
    await whileLocked('api_keys', async () => {
      const answers = Promise.all(keys.map((k) => get('/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime', basicAuth(k))));
      await new Promise((r) => setTimeout(r, 100));
      await projectorFoldsWhileTheyWait(answers, 1_700_000_100);
    });
    expect((await get('/v3/REST/eventcallbackurl', basicAuth(keys[0] as (typeof keys)[number]))).status).toBe(200);
  });

  it('a webhook replay whose later batch fails says where to go on, and going on enqueues each event once', async () => {
    const tenant = '9901';
    await hook(t.db, tenant, { EventType: 'open', Url: 'https://hooks.example.com/opens' });
    const opens = Array.from({ length: 1500 }, (_, i) => ({ event: 'open', time: 1_700_000_000 + i, MessageID: String(900_000 + i), email: `r${i}@example.com`, EventID: `replay-${i}` }));
    await append(t.db, tenant, opens);
    // As if a dispatcher had fanned them out (a replay sends again only what it has passed).
    await sql`INSERT INTO checkpoints (name, position) SELECT ${WEBHOOKS_CHECKPOINT}, max(position) FROM events
      ON CONFLICT (name) DO UPDATE SET position = excluded.position`.execute(t.db.kysely);
    const { rows } = await sql<{ p: string }>`SELECT position::text AS p FROM events WHERE api_key_id = ${tenant} ORDER BY position LIMIT 1 OFFSET 1000`.execute(t.db.kysely);
    const failFrom = BigInt(rows[0]?.p as string);
    // The second batch of 1000 (positions from failFrom on) cannot be enqueued.
    await sql`CREATE FUNCTION fail_replay() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no room'; END $$`.execute(t.db.kysely);
    await sql.raw(`CREATE TRIGGER fail_replay BEFORE INSERT ON webhook_deliveries FOR EACH ROW WHEN (substr(NEW.webhook_id, 5)::bigint >= ${failFrom}) EXECUTE FUNCTION fail_replay()`).execute(t.db.kysely);
    const grouping = { windowMs: 0, maxEvents: 100, maxBytes: 1_000_000 };
    const first = await replayWebhookEvents(t.db.kysely, tenant, { fromPosition: 0n }, grouping);
    expect({ events: first.events, next: first.nextPosition }).toEqual({ events: 1000, next: failFrom - 1n });
    await sql`DROP TRIGGER fail_replay ON webhook_deliveries`.execute(t.db.kysely);
    const rest = await replayWebhookEvents(t.db.kysely, tenant, { fromPosition: first.nextPosition as bigint }, grouping);
    expect({ events: rest.events, next: rest.nextPosition }).toEqual({ events: 500, next: null });
    const outbox = await sql<{ n: number; distinct: number }>`SELECT count(*)::int AS n, count(DISTINCT webhook_id)::int AS distinct FROM webhook_deliveries WHERE api_key_id = ${tenant}`.execute(t.db.kysely);
    expect(outbox.rows[0]).toEqual({ n: 1500, distinct: 1500 });
  });

  it('do not hold up a shutdown: a request still waiting when the HTTP server has closed is cancelled', async () => {
    // No timeout at all: only the shutdown's cancel can end the request's statement.
    const { service: other } = await startHttpService(t, ['api'], { API_STATEMENT_TIMEOUT_MS: '0', HTTP_SHUTDOWN_GRACE_MS: '200' });
    await whileLocked('callback_urls', async (locker) => {
      const answer = get('/v3/REST/eventcallbackurl', basicAuth(t.key), other.url as string).catch((err: unknown) => err);
      await new Promise((r) => setTimeout(r, 200));
      const stopped = await Promise.race([other.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still stopping after 15 s'), 15_000))]);
      expect(stopped).toBe('stopped');
      await answer;
      // Its backend goes (a server process leaves pg_stat_activity a moment after its client has
      // closed); one not cancelled would wait on the lock until the locker lets go.
      await waitFor('the request pool`s backends to go', async () => {
        const { rows } = await locker.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mailtally:api:requests'",
        );
        return rows[0]?.n === 0;
      }, 5000);
    });
  });
});

describe('the request pool', () => {
  it('cancels a statement past its timeout, and with 0 has none even where the database sets one', async () => {
    const database = await createTestDatabase();
    try {
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      await admin.query(`ALTER DATABASE "${database.name}" SET statement_timeout = '100ms'`);
      await admin.end();
      const config = loadConfig({ DATABASE_URL: database.url, PG_POOL_SIZE: '2' }).database;
      if (config.kind !== 'postgres') throw new Error('expected Postgres');
      const none = await connectRequestPool(config, { application: 'test:requests', statementTimeoutMs: 0 });
      const short = await connectRequestPool(config, { application: 'test:requests', statementTimeoutMs: 200 });
      try {
        await expect(sql`SELECT pg_sleep(0.4)`.execute(none.kysely)).resolves.toBeDefined();
        await expect(sql`SELECT pg_sleep(0.05)`.execute(short.kysely)).resolves.toBeDefined();
        await expect(sql`SELECT pg_sleep(0.4)`.execute(short.kysely)).rejects.toMatchObject({ code: '57014', message: expect.stringContaining('statement timeout') });
      } finally {
        await none.close(t.db.kysely);
        await short.close(t.db.kysely);
      }
    } finally {
      await database.drop();
    }
  });
});
