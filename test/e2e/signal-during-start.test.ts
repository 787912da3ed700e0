import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SCHEMA_LOCK_KEY } from '../../src/db/schema-lock.js';
import { SERVICE_NODE_FLAGS } from '../../src/node-flags.js';
import { CLI_PATH, Proc, spawnCli, stopAll } from '../support/processes.js';
import { createTestDatabase } from '../support/services.js';

/**
 * A SIGTERM while `serve` is still starting (here: waiting for the schema lock another process
 * holds, as during a long migration or read-model rebuild) stops it: exit 0, nothing left
 * running, the database not migrated. Also as PID 1 of its own PID namespace, as in a
 * container without an init, where a signal with no handler is ignored.
 */

const drops: (() => Promise<void>)[] = [];
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  for (const drop of drops) await drop();
});

const canUnshare = (() => {
  try {
    return execFileSync('unshare', ['--user', '--map-root-user', '--pid', '--fork', 'sh', '-c', 'echo $$'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() === '1';
  } catch {
    return false;
  }
})();

/** A fresh database whose schema lock the test holds, and a client to look at it. */
async function lockedDatabase(): Promise<{ url: string; admin: pg.Client }> {
  const database = await createTestDatabase();
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  drops.push(async () => {
    await admin.end().catch(() => {});
    await database.drop();
  });
  await admin.query('SELECT pg_advisory_lock($1)', [SCHEMA_LOCK_KEY.toString()]);
  return { url: database.url, admin };
}

/** Sessions of mailtally processes on this database, and how many of them try for the schema lock. */
async function sessions(admin: pg.Client): Promise<{ all: number; tryingLock: number }> {
  const { rows } = await admin.query<{ all: number; trying: number }>(
    "SELECT count(*)::int AS all, (count(*) FILTER (WHERE query LIKE '%advisory_lock(%'))::int AS trying FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'mailtally:%'",
  );
  return { all: rows[0]?.all ?? 0, tryingLock: rows[0]?.trying ?? 0 };
}

async function waitForLockWaiter(admin: pg.Client, p: Proc): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if ((await sessions(admin)).tryingLock > 0) return;
    if (p.exit !== null) throw new Error(`serve exited before it waited for the schema lock\n${p.describe()}`);
    if (Date.now() > deadline) throw new Error(`serve did not wait for the schema lock\n${p.describe()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function migrated(admin: pg.Client): Promise<boolean> {
  const { rows } = await admin.query<{ t: string | null }>("SELECT to_regclass('mailtally_migrations')::text AS t");
  return rows[0]?.t != null;
}

async function expectStoppedDuringStart(admin: pg.Client, p: Proc, signal: () => void): Promise<void> {
  await waitForLockWaiter(admin, p);
  signal();
  expect(await p.waitForExit(20_000)).toEqual({ code: 0, signal: null });
  expect(p.jsonLines().map((l) => l['msg'])).toContain('stopped before it had started');
  // Its connections went with it, and nothing was migrated.
  const deadline = Date.now() + 10_000;
  while ((await sessions(admin)).all > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await sessions(admin)).toEqual({ all: 0, tryingLock: 0 });
  expect(await migrated(admin)).toBe(false);
}

describe('a signal while serve is starting', () => {
  it('SIGTERM stops it: exit 0, the start given up', async () => {
    const { url, admin } = await lockedDatabase();
    const p = spawnCli(['serve', '--roles', 'api'], { env: { DATABASE_URL: url, PORT: '0', LOG_LEVEL: 'info' } });
    await expectStoppedDuringStart(admin, p, () => p.signal('SIGTERM'));
  }, 90_000);

  it.skipIf(!canUnshare)('as PID 1 of a PID namespace (a container without an init), SIGTERM stops it too', async () => {
    const { url, admin } = await lockedDatabase();
    const p = new Proc('unshare', ['--user', '--map-root-user', '--pid', '--fork', process.execPath, ...SERVICE_NODE_FLAGS, CLI_PATH, 'serve', '--roles', 'api'], {
      env: { DATABASE_URL: url, PORT: '0', LOG_LEVEL: 'info' },
    });
    // unshare forks: the node process (PID 1 inside) is its only child.
    const node = await p.waitFor('the node process under unshare', () => {
      try {
        const children = readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim();
        return children === '' ? undefined : Number(children.split(' ')[0]);
      } catch {
        return undefined;
      }
    });
    try {
      await expectStoppedDuringStart(admin, p, () => process.kill(node, 'SIGTERM'));
    } finally {
      try {
        process.kill(node, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }, 90_000);
});
