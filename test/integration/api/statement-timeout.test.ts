import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../../src/main.js';
import { basicAuth } from '../../support/api.js';
import { sampleEvents } from '../../support/events.js';
import { type TestEnv, createTestEnv, startHttpService } from '../../support/harness.js';
import { append, caughtUp } from '../../support/projections.js';

/**
 * API_STATEMENT_TIMEOUT_MS on real Postgres: a request whose query waits behind a lock (an
 * operator's `LOCK TABLE`, a long migration) is cancelled by the server at the timeout and
 * answered 503 in Mailjet's error envelope; the requests have a pool of their own, so while
 * more of them wait than the pool has connections, the projector in the same process goes on
 * folding events. Before, they waited for ever and held every connection of the one pool, and
 * the projector with them.
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

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${service.url as string}${path}`, { headers: { authorization: basicAuth(t.key) } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('API requests under a statement timeout', () => {
  it('are answered 503 when their query waits past it, and leave the projector its connections', async () => {
    const locker = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE callback_urls IN ACCESS EXCLUSIVE MODE');
      // Three times as many requests as the pool has connections, all waiting on the lock.
      const answers = Promise.all(Array.from({ length: 6 }, () => get('/v3/REST/eventcallbackurl')));
      await new Promise((r) => setTimeout(r, 100));
      await append(t.db, String(t.key.APIKeyID), sampleEvents('424242', 1_700_000_000));
      await caughtUp(t.db, undefined, 15_000);

      for (const a of await answers) {
        expect(a.status).toBe(503);
        expect(a.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringContaining('took longer than this server allows'), StatusCode: 503 });
      }
      // The server cancelled them: nothing of the API's waits on the lock any more.
      const { rows } = await locker.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%:requests' AND state = 'active'",
      );
      expect(rows[0]?.n).toBe(0);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
    }
    const after = await get('/v3/REST/eventcallbackurl');
    expect(after.status).toBe(200);
    expect(after.body['Count']).toBe(0);
  });
});
