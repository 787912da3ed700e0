import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Config } from '../config.js';
import { acquireDataDirLock } from './data-dir-lock.js';
import { pgliteDialect } from './pglite-dialect.js';
import type { Database } from './schema.js';

/** A connected database: kysely for queries, plus what only one of the two drivers can do. */
export interface Db {
  readonly kysely: Kysely<Database>;
  readonly kind: 'postgres' | 'pglite';
  /** The pg pool (real Postgres only): LISTEN/NOTIFY and COPY need a raw client. */
  readonly pool: pg.Pool | null;
  close(): Promise<void>;
}

const INT8_OID = 20;

/** int8 → bigint on both drivers, so positions and ids never pass through a double. */
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export async function connectDb(config: Config['database'], opts: { application?: string } = {}): Promise<Db> {
  if (config.kind === 'postgres') {
    const pool = new pg.Pool({
      connectionString: config.url,
      max: config.poolSize,
      types: pgTypes,
      application_name: opts.application ?? 'mailtally',
      idleTimeoutMillis: 30_000,
      connectionTimeoutMillis: 10_000,
    });
    // A connection dropped by the server (restart, pg_terminate_backend) must not crash the process;
    // the query that was using it fails and is retried by its caller.
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}));
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { kysely, kind: 'postgres', pool, close: () => kysely.destroy() };
  }

  mkdirSync(config.dataDir, { recursive: true });
  const unlock = acquireDataDirLock(config.dataDir);
  try {
    const client = await PGlite.create(config.dataDir, {
      parsers: { [INT8_OID]: (v: string) => BigInt(v) },
    });
    const kysely = new Kysely<Database>({ dialect: pgliteDialect(client) });
    return {
      kysely,
      kind: 'pglite',
      pool: null,
      close: async () => {
        await kysely.destroy();
        unlock();
      },
    };
  } catch (err) {
    unlock();
    throw err;
  }
}
