import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Projection } from '../../projections/kit/types.js';
import { loadConfig } from '../../src/config.js';
import { connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { logHead } from '../../src/log/read.js';
import type { Logger } from '../../src/logger.js';
import { type Role, type Service, startService } from '../../src/main.js';
import { REBUILD_STOP_GRACE_MS, rebuildInBackground } from '../../src/projector/rebuild-in-background.js';
import { rebuildStale } from '../../src/projector/rebuild-stale.js';
import { replay } from '../../src/projector/replay.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { basicAuth } from '../support/api.js';
import { sampleEvents } from '../support/events.js';
import { capturingLogger, createTestEnv, startHttpService, type TestEnv, waitFor } from '../support/harness.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * A start after an upgrade that changed one projection's version (geo): the service serves at
 * once while geo's read models are rebuilt in the background. A reader holding geo_stats in a
 * transaction keeps the rebuild's swap waiting (it retries every few seconds for 5 minutes), so
 * the rebuild is still running whatever the machine's speed while the test looks.
 */

const GEO = PROJECTIONS.find((p) => p.name === 'geo') as Projection;
const OTHERS = PROJECTIONS.filter((p) => p !== GEO);
const SWAP_WAITING = 'rebuilt read models waiting for locks on the live tables to swap in';

let t: TestEnv;
let tenant: string;
let messages = 0;
const readers: pg.Client[] = [];
/** Every start, awaited and stopped after each test (one that returned late included). */
const starts: Promise<{ service: Service }>[] = [];

const appendMessages = async (n: number): Promise<void> => {
  for (let m = 0; m < n; m++, messages++) await append(t.db, tenant, sampleEvents(String(7000 + messages), 1_433_333_949 + messages * 977));
};

/** geo's read models and checkpoint recorded as built by the version before this code's. */
async function makeGeoStale(): Promise<void> {
  await sql`UPDATE projections SET version = ${GEO.version - 1} WHERE name = 'geo'`.execute(t.db.kysely);
  await sql`UPDATE checkpoints SET version = ${GEO.version - 1} WHERE name = 'geo'`.execute(t.db.kysely);
}

/** A reader in a transaction that has read geo_stats: the swap cannot lock it until `release`. */
async function holdGeoStats(): Promise<{ release: () => Promise<void> }> {
  const reader = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
  await reader.connect();
  readers.push(reader);
  await reader.query('BEGIN');
  await reader.query('SELECT count(*) FROM geo_stats');
  return { release: () => reader.query('COMMIT').then(() => {}) };
}

/** `started`, or a failure naming `what` if it has not settled within `ms`. */
async function within<T>(ms: number, what: string, started: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([started, late]);
  } finally {
    clearTimeout(timer);
  }
}

const checkpoints = async (): Promise<Map<string, bigint>> =>
  new Map((await t.db.kysely.selectFrom('checkpoints').select(['name', 'position']).execute()).map((r) => [r.name, r.position]));

const geoVersion = async (): Promise<{ built: number; checkpoint: number | null } | undefined> =>
  (
    await sql<{ built: number; checkpoint: number | null }>`
      SELECT p.version AS built, c.version AS checkpoint FROM projections p JOIN checkpoints c USING (name) WHERE name = 'geo'`.execute(t.db.kysely)
  ).rows[0];

interface ProjectorStatus {
  held: string[];
  rebuilding: string[];
  rebuildError: string | null;
}

async function projectorStatus(app: FastifyInstance): Promise<ProjectorStatus> {
  const res = await app.inject({ method: 'GET', url: '/status' });
  expect(res.statusCode).toBe(200);
  return (res.json() as { projector: ProjectorStatus }).projector;
}

/** Opened and clicked counts per country, as the API answers them. */
async function geoStatistics(app: FastifyInstance): Promise<unknown> {
  const res = await app.inject({ method: 'GET', url: '/v3/REST/geostatistics', headers: { authorization: basicAuth(t.key) } });
  expect(res.statusCode).toBe(200);
  return res.json();
}

beforeAll(async () => {
  t = await createTestEnv();
  tenant = String(t.key.APIKeyID);
  await ensureProjectionTables(t.db.kysely, PROJECTIONS);
  await appendMessages(10);
  await replay(t.db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
});
afterEach(async () => {
  for (const r of readers.splice(0)) await r.end().catch(() => {});
  for (const s of starts.splice(0)) await s.then(({ service }) => service.stop(), () => {});
});
afterAll(async () => {
  await t?.cleanup();
});

/** The service with `roles`; fails if its start takes more than 20 s. */
function start(roles: Role[], log: Logger): Promise<{ service: Service; app: FastifyInstance }> {
  const starting = startHttpService(t, roles, { PROJECTOR_LEASE_MS: '1000', PROJECTOR_POLL_MS: '100' }, log);
  starts.push(starting);
  return within(20_000, 'the start', starting);
}

describe('a projector starting with a projection built by another version of its code', () => {
  it('serves at once and applies the others while it rebuilds that one in the background, then takes it up', async () => {
    await makeGeoStale();
    const reader = await holdGeoStats();
    const { log, lines } = capturingLogger();
    const { app } = await start(['api', 'projector'], log);

    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const before = await geoStatistics(app);
    expect(before).toMatchObject({ Count: 2 });
    await waitFor('the rebuild to wait for the reader', async () => lines().some((l) => l['msg'] === SWAP_WAITING), 30_000);
    expect(await projectorStatus(app)).toMatchObject({ rebuilding: ['geo'], rebuildError: null });

    // The other read models follow the log; geo's old tables keep serving, unchanged.
    await appendMessages(5);
    await caughtUp(t.db, OTHERS);
    expect((await checkpoints()).get('geo')).toBeLessThan(await logHead(t.db.kysely));
    expect(await geoStatistics(app)).toEqual(before);
    const status = await projectorStatus(app);
    expect(status.held.sort()).toEqual(OTHERS.map((p) => p.name).sort());
    expect(status.rebuilding).toEqual(['geo']);

    await reader.release();
    await waitFor('geo taken up', async () => (await projectorStatus(app)).held.includes('geo'), 60_000);
    expect(await projectorStatus(app)).toMatchObject({ rebuilding: [], rebuildError: null });
    expect(lines().some((l) => l['msg'] === 'rebuilt read models taken up: applying them')).toBe(true);
    expect(await geoVersion()).toEqual({ built: GEO.version, checkpoint: GEO.version });
    await appendMessages(3);
    await caughtUp(t.db);
    expect(await verifyAgainstReplay(t.db)).toEqual(NO_DIFFERENCES);
    expect(await geoStatistics(app)).not.toEqual(before);
  }, 120_000);

  it('stops during the rebuild: the rebuild ends first and leaves nothing, the live tables unchanged', async () => {
    await makeGeoStale();
    const reader = await holdGeoStats();
    const { log, lines } = capturingLogger();
    const { service } = await start(['projector'], log);
    await waitFor('the rebuild to wait for the reader', async () => lines().some((l) => l['msg'] === SWAP_WAITING), 30_000);
    await within(20_000, 'the stop', service.stop());

    // Had the database closed under the rebuild, its shadow tables and lease would be left.
    const { rows: shadows } = await sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE tablename LIKE '%\\_\\_shadow'`.execute(t.db.kysely);
    expect(shadows).toEqual([]);
    const leases = await t.db.kysely.selectFrom('leases').select('name').where('name', 'like', 'replay:%').execute();
    expect(leases).toEqual([]);
    expect(lines().filter((l) => (l['level'] as number) >= 50)).toEqual([]);
    expect(await geoVersion()).toEqual({ built: GEO.version - 1, checkpoint: GEO.version - 1 });
    await reader.release();
  }, 120_000);

  it('stops during a long statement of the rebuild: its connection is ended after a moment, not waited for', async () => {
    await makeGeoStale();
    // As an interrupted run left it, held by a reader: the rebuild's first statement on it waits.
    await sql`CREATE TABLE IF NOT EXISTS geo_stats__shadow (x int)`.execute(t.db.kysely);
    const reader = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
    await reader.connect();
    readers.push(reader);
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM geo_stats__shadow');
    const { log, lines } = capturingLogger();
    const { service } = await start(['projector'], log);
    await waitFor('the rebuild`s statement to wait on the lock', async () => {
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'mailtally:rebuild' AND wait_event_type = 'Lock'`.execute(t.db.kysely);
      return rows[0]?.n === 1;
    }, 30_000);
    // The code before waited for the statement, here for as long as the reader holds the table.
    const began = Date.now();
    await within(10_000, 'the stop', service.stop());
    expect(Date.now() - began).toBeGreaterThanOrEqual(REBUILD_STOP_GRACE_MS - 100);
    expect(lines().filter((l) => (l['level'] as number) >= 50)).toEqual([]);
    expect(await geoVersion()).toEqual({ built: GEO.version - 1, checkpoint: GEO.version - 1 });
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mailtally:rebuild'`.execute(t.db.kysely);
    expect(rows[0]?.n).toBe(0);
    await reader.query('COMMIT');
    await sql`DROP TABLE IF EXISTS geo_stats__shadow`.execute(t.db.kysely);
  }, 120_000);

  it('a failed try (its connection lost) is logged and tried again while the others are applied', async () => {
    await makeGeoStale();
    const reader = await holdGeoStats();
    const { log, lines } = capturingLogger();
    const projector = await startProjector(t.db, { leaseMs: 1000, holdBack: ['geo'] }, PROJECTIONS, log);
    const rebuild = (signal: AbortSignal) => rebuildStale(t.db, [GEO], { readBatch: 1000, catchUpBatch: 1000, signal }, log);
    const stop = rebuildInBackground(['geo'], rebuild, projector, log, { firstMs: 200, maxMs: 1000 });
    try {
      // The swap's try, waiting for the lock the reader keeps, loses its connection.
      await waitFor('the swap to wait for its lock', async () => {
        const { rows } = await sql<{ pid: number }>`
          SELECT pg_terminate_backend(pid) AS pid FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'active' AND query LIKE 'LOCK TABLE geo_stats%'`.execute(t.db.kysely);
        return rows.length > 0;
      }, 30_000);
      await waitFor('the failure', async () => projector.stats.rebuildError !== null);
      const failed = lines().filter((l) => l['msg'] === 'rebuilding read models failed: their old tables keep serving; trying again');
      expect(failed).toMatchObject([{ level: 50, projections: ['geo'], attempt: 1, retryInSeconds: 0.2 }]);
      expect(projector.stats.rebuildError).toMatch(/terminat/);

      await appendMessages(2);
      await caughtUp(t.db, OTHERS);
      await waitFor('a second try', async () => lines().some((l) => l['msg'] === 'read models built by another version of their code: rebuilding' && l['attempt'] === 2), 10_000);
      expect(projector.stats.rebuilding).toEqual(['geo']);

      await reader.release();
      await waitFor('geo taken up', async () => projector.stats.held.includes('geo'), 60_000);
      expect(projector.stats).toMatchObject({ rebuilding: [], rebuildError: null });
      await caughtUp(t.db);
      expect(await verifyAgainstReplay(t.db)).toEqual(NO_DIFFERENCES);
    } finally {
      await stop();
      await projector.stop();
    }
  }, 120_000);

  it('on the embedded database too: the rebuild takes turns with the rest on its one session, then geo is taken up', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-pglite-'));
    try {
      const db = await connectDb({ kind: 'pglite', dataDir });
      await migrateToLatest(db.kysely);
      await ensureProjectionTables(db.kysely, PROJECTIONS);
      for (let m = 0; m < 10; m++) await append(db, '1', sampleEvents(String(8000 + m), 1_433_333_949 + m * 977));
      await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
      await sql`UPDATE projections SET version = ${GEO.version - 1} WHERE name = 'geo'`.execute(db.kysely);
      await sql`UPDATE checkpoints SET version = ${GEO.version - 1} WHERE name = 'geo'`.execute(db.kysely);
      // A key already there: the start prints none.
      await createApiKey(db.kysely);
      await db.close();

      const { log } = capturingLogger();
      const service = await startService(loadConfig({ DATA_DIR: dataDir, PORT: '0', PROJECTOR_LEASE_MS: '1000', PROJECTOR_POLL_MS: '100' }), ['api', 'projector'], log);
      try {
        const app = service.http as FastifyInstance;
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
        await waitFor('geo taken up', async () => (await projectorStatus(app)).held.length === PROJECTIONS.length, 60_000);
        expect((await projectorStatus(app)).rebuilding).toEqual([]);
        for (let m = 10; m < 13; m++) await append(service.db, '1', sampleEvents(String(8000 + m), 1_433_333_949 + m * 977));
        await caughtUp(service.db);
        expect(await verifyAgainstReplay(service.db)).toEqual(NO_DIFFERENCES);
      } finally {
        await service.stop();
      }
    } finally {
      // PGlite may still flush its in-memory file system for a moment after close().
      await new Promise((r) => setTimeout(r, 500));
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
