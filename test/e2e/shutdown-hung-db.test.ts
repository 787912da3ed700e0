import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type TestEnv, createTestEnv, waitFor } from '../support/harness.js';
import { type JetStreamHandle, createStream, deleteStreamQuietly, openJetStream } from '../support/jetstream.js';
import { spawnCli, stopAll } from '../support/processes.js';

/**
 * `serve` gets SIGTERM while its ingest write waits on a database that does not answer (the
 * `events` table locked): it exits after SHUTDOWN_TIMEOUT_MS instead of hanging, and the events
 * it held unacked are stored by the next start.
 */

let t: TestEnv | null = null;
let h: JetStreamHandle | null = null;
let lock: pg.Client | null = null;

afterEach(stopAll);
afterAll(async () => {
  await lock?.end().catch(() => {});
  await stopAll();
  await h?.close().catch(() => {});
  if (t !== null) {
    await deleteStreamQuietly(t.env['NATS_URL'] as string, t.env['NATS_STREAM'] as string);
    await t.cleanup();
  }
});

const stored = async (env: TestEnv) =>
  Number((await sql<{ n: string }>`SELECT count(*) AS n FROM events WHERE event_id LIKE 'hung-%'`.execute(env.db.kysely)).rows[0]?.n);

describe('serve on SIGTERM with the database hung', () => {
  it('exits after SHUTDOWN_TIMEOUT_MS, and the next start stores the events it left unacked', { timeout: 120_000 }, async () => {
    const env = (t = await createTestEnv());
    const js = (h = await openJetStream(env.env['NATS_URL'] as string));
    await createStream(js, env.env['NATS_STREAM'] as string, env.env['NATS_SUBJECT_PREFIX'] as string);
    const serveEnv = { ...env.env, LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '3000' };
    const first = spawnCli(['serve', '--roles', 'ingest'], { env: serveEnv });
    await first.serverUrl();

    lock = new pg.Client({ connectionString: env.env['DATABASE_URL'] });
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    for (let i = 0; i < 5; i++) {
      await js.js.publish(env.subject(env.key.APIKeyID, 'open'), `{"event":"open","time":${1_700_000_000 + i},"MessageID":${30_000 + i},"email":"h${i}@example.com","EventID":"hung-${i}"}`);
    }
    await waitFor('an ingest write waiting on the lock', async () => {
      const r = await sql<{ n: string }>`
        SELECT count(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name LIKE 'mailtally:%'`.execute(env.db.kysely);
      return Number(r.rows[0]?.n) > 0;
    });

    first.signal('SIGTERM');
    const exit = await first.waitForExit(30_000).catch((err: unknown) => err);
    expect(exit).toEqual({ code: 1, signal: null });
    expect(first.jsonLines().some((l) => l['msg'] === 'shutdown did not finish in time (database not answering?); exiting without it')).toBe(true);

    await lock.query('COMMIT');
    await lock.end();
    lock = null;
    const second = spawnCli(['serve', '--roles', 'ingest'], { env: serveEnv });
    await second.serverUrl();
    await waitFor('the events stored once', async () => (await stored(env)) === 5, 60_000, 200);
  });
});
