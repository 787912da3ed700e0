import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { ensureProjectionCheckpoints } from '../../src/log/checkpoints.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { createTestDatabase } from './services.js';
import { postgresBehindProxy, type TcpProxy } from './tcp-proxy.js';

/** The two databases the log must work on: real Postgres and embedded PGlite. */
export const DIALECTS = ['postgres', 'pglite'] as const;
export type Dialect = (typeof DIALECTS)[number];

/** A new migrated database; `url` is the Postgres one's, for child processes (null for PGlite). */
export async function openMigratedDb(dialect: Dialect): Promise<{ db: Db; url: string | null; cleanup: () => Promise<void> }> {
  if (dialect === 'postgres') {
    const database = await createTestDatabase();
    const db = await connectDb({ kind: 'postgres', url: database.url, poolSize: 10 });
    await migrateToLatest(db.kysely);
    return {
      db,
      url: database.url,
      cleanup: async () => {
        await db.close();
        await database.drop();
      },
    };
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-pglite-'));
  const db = await connectDb({ kind: 'pglite', dataDir });
  await migrateToLatest(db.kysely);
  return {
    db,
    url: null,
    cleanup: async () => {
      await db.close();
      // PGlite may still flush its in-memory file system for a moment after close().
      await new Promise((r) => setTimeout(r, 500));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * For the tests of one describe block: a new migrated database with every read-model table,
 * opened before them and removed after them. The getter returns it once it is open.
 */
export function readModelDb(dialect: Dialect): () => Db {
  let db: Db | null = null;
  let cleanup: () => Promise<void> = async () => {};
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await ensureProjectionTables(db.kysely, PROJECTIONS);
  });
  afterAll(async () => {
    await cleanup();
  });
  return () => {
    if (db === null) throw new Error('the read-model database is opened before the tests (beforeAll)');
    return db;
  };
}

/**
 * A new migrated Postgres database with the read-model tables and their checkpoints, reached
 * through a TCP proxy the test can cut or freeze (the database "away" for this client only).
 */
export async function migratedDbBehindProxy(): Promise<{ db: Db; proxy: TcpProxy; cleanup: () => Promise<void> }> {
  const database = await createTestDatabase();
  const setup = await connectDb({ kind: 'postgres', url: database.url, poolSize: 2 });
  try {
    await migrateToLatest(setup.kysely);
    await ensureProjectionTables(setup.kysely, PROJECTIONS);
    await ensureProjectionCheckpoints(setup.kysely, PROJECTIONS.map((p) => p.name));
  } finally {
    await setup.close();
  }
  const { proxy, url } = await postgresBehindProxy(database.url);
  const db = await connectDb({ kind: 'postgres', url: url.toString(), poolSize: 4 });
  return {
    db,
    proxy,
    cleanup: async () => {
      await db.close().catch(() => {});
      await proxy.stop();
      await database.drop();
    },
  };
}
