import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectDb, type Db } from '../../src/db/connect.js';
import { waitFor } from '../support/harness.js';
import { PrivatePostgres } from '../support/private-postgres.js';
import { sleep } from '../support/processes.js';
import { withClient } from '../support/services.js';

/**
 * The LISTEN connection (`db.listen`, used by the projector, the dispatcher and the API cache)
 * against a server that accepts connections but refuses LISTEN: a standby in recovery, as an
 * old primary comes back after a failover (a cluster of the test's own, restarted with
 * `standby.signal`). Each refused try must close its connection; before, one stayed open per
 * retry, a second apart.
 */

let server: PrivatePostgres;
let db: Db;

beforeAll(async () => {
  server = await PrivatePostgres.create();
  db = await connectDb({ kind: 'postgres', url: server.url(), poolSize: 2 });
}, 120_000);

afterAll(async () => {
  await db?.close();
  server?.destroy();
});

const admin = <T>(query: (c: pg.Client) => Promise<T>): Promise<T> => withClient(server.url(), query);

const listenConnections = () =>
  admin(async (c) => Number((await c.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'mailtally:listen'")).rows[0]?.n));

it('keeps no connection per LISTEN a standby refuses, and listens again once the server is promoted', { timeout: 120_000 }, async () => {
  let wakeups = 0;
  const unlisten = await db.listen('mt_standby_test', () => {
    wakeups += 1;
  });
  try {
    expect(await listenConnections()).toBe(1);

    await server.restartAsStandby();
    // The listener tries again about once a second, and the standby refuses each LISTEN.
    await sleep(4500);
    expect(await listenConnections()).toBeLessThanOrEqual(1);
    // A new listener is refused, with Postgres's reason, and leaves nothing open either.
    for (let i = 0; i < 3; i++) await expect(db.listen('mt_standby_other', () => {})).rejects.toThrow(/LISTEN during recovery/);
    await sleep(500);
    expect(await listenConnections()).toBeLessThanOrEqual(1);

    await server.promote();
    // Back once its LISTEN has run (the listener's wake-up on reconnecting follows at once).
    const listening = () =>
      admin(async (c) => (await c.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'mailtally:listen' AND state = 'idle' AND query LIKE 'LISTEN%'")).rowCount === 1);
    await waitFor('the listener back', listening, 20_000, 100);
    await sleep(100);
    const before = wakeups;
    await waitFor('a NOTIFY heard', async () => {
      await admin((c) => c.query('NOTIFY mt_standby_test'));
      return wakeups > before;
    }, 20_000, 200);
  } finally {
    await unlisten();
  }
});
