import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { type Config, withoutPassword } from '../config.js';
import { DATA_DIR_PID_FILE, DataDirInUseError, acquireDataDirLock } from './data-dir-lock.js';
import { PgListener } from './pg-listener.js';
import type { Database } from './schema.js';

/** A connected database: kysely for queries, plus what only one of the two drivers can do. */
export interface Db {
  readonly kysely: Kysely<Database>;
  readonly kind: 'postgres' | 'pglite';
  /** The pg pool (real Postgres only): LISTEN/NOTIFY and COPY need a raw client. */
  readonly pool: pg.Pool | null;
  /**
   * Calls `onNotify` with its payload for each NOTIFY on `channel` until the returned function
   * is called. On real Postgres every channel of the Db shares one connection of its own
   * (pg-listener.ts), opened again after a loss (calling `onNotify(null)` once more then, since
   * notifications may have been missed).
   */
  listen(channel: string, onNotify: (payload: string | null) => void): Promise<() => Promise<void>>;
  /**
   * Where a long job renews its leases: on real Postgres one more connection, outside the pool
   * (opened on first use, closed with the Db), so that a renewal never waits behind the job's
   * own statements however long they run and however small `PG_POOL_SIZE` is; on PGlite, which
   * has one connection, `kysely`.
   */
  leaseConnection(): Kysely<Database>;
  /**
   * For a process about to quit in the middle of its work: ends the pool's connections on the
   * server, the statements they run with them (Postgres would otherwise run those to their end,
   * unaware that the client is gone), through a connection of its own, giving up after
   * `timeoutMs`. Ended rather than cancelled: a cancelled one could start the next statement
   * before the process exits. Nothing to do on PGlite.
   */
  terminateConnections(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

const INT8_OID = 20;
const BYTEA_OID = 17;

/** int8 → bigint on both drivers, so positions and ids never pass through a double. */
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export async function connectDb(config: Config['database'], opts: { application?: string } = {}): Promise<Db> {
  if (config.kind === 'postgres') {
    const clients = new Set<pg.PoolClient>();
    const pool = await openPool(config, { application: opts.application ?? 'mailtally', clients });
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const listener = new PgListener(config.url);
    let leases: { kysely: Kysely<Database>; pool: pg.Pool } | null = null;
    const leaseConnection = () => {
      if (leases === null) {
        const own = new pg.Pool({ ...pool.options, max: 1 });
        own.on('error', () => {});
        own.on('connect', (client) => client.on('error', () => {}));
        leases = { pool: own, kysely: new Kysely<Database>({ dialect: new PostgresDialect({ pool: own }) }) };
      }
      return leases.kysely;
    };
    const close = async () => {
      await listener.close();
      if (leases !== null) {
        await leases.kysely.destroy();
        if (!leases.pool.ending) await leases.pool.end();
      }
      await kysely.destroy();
      // kysely ends the pool only once it has run a query through it; a process stopped before
      // (during its start) would be kept alive by the pool's own connections.
      if (!pool.ending) await pool.end();
    };
    const terminateConnections = (timeoutMs: number) => terminateBackends(pool, backendPids(clients), timeoutMs);
    return { kysely, kind: 'postgres', pool, listen: (channel, onNotify) => listener.listen(channel, onNotify), leaseConnection, terminateConnections, close };
  }

  // Loaded only for the embedded database: PGlite and kysely-pglite (which brings a TypeScript
  // loader with it) are megabytes of code a Postgres deployment never runs.
  const [{ PGlite }, { pgliteDialect }] = await Promise.all([import('@electric-sql/pglite'), import('./pglite-dialect.js')]);
  const unlock = openDataDir(config.dataDir);
  try {
    const client = await PGlite.create(config.dataDir, {
      // bytea as a Buffer, as pg gives it (PGlite's own parser gives a plain Uint8Array, whose
      // toString('base64') joins the bytes with commas). The text form is hex: `\x` then 2 digits a byte.
      parsers: { [INT8_OID]: (v: string) => BigInt(v), [BYTEA_OID]: (v: string) => Buffer.from(v.slice(2), 'hex') },
      // Write-ahead log kept to about a quarter of PGlite's 1 GB default (it was a gigabyte of a
      // 2 GB data directory); the service checkpoints it every 10 minutes (embedded-maintenance.ts).
      postgresqlconf: ['max_wal_size = 256MB', 'min_wal_size = 64MB'],
    }).catch((err: unknown) => {
      throw cannotOpen(config.dataDir, err);
    });
    // Every lease here is a process's that has ended (this one holds the directory's lock, and
    // only one process at a time may): one killed would otherwise hold its read models, or a
    // replay's, until its leases lapsed (15 s to a minute).
    await client.exec(`DO $$ BEGIN IF to_regclass('leases') IS NOT NULL THEN DELETE FROM leases; END IF; END $$`);
    const kysely = new Kysely<Database>({ dialect: pgliteDialect(client) });
    return {
      kysely,
      kind: 'pglite',
      pool: null,
      listen: async (channel, onNotify) => {
        const unlisten = await client.listen(channel, (payload) => onNotify(payload));
        return async () => {
          await unlisten().catch(() => {});
        };
      },
      leaseConnection: () => kysely,
      terminateConnections: async () => {},
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

/**
 * A pool of its own for the API's requests (Postgres only), whose every statement the server
 * cancels after `statementTimeoutMs` (0: never, whatever the database's own setting): a request
 * stuck behind a lock or asking for too much cannot hold a connection for ever, and however many
 * requests wait, the roles sharing the process (projector, dispatcher, ingest) keep their own
 * pool's connections. `close(via)` first cancels, through `via`, the statements still running on
 * it (a pool ends only once every connection is given back).
 */
export async function connectRequestPool(
  config: Extract<Config['database'], { kind: 'postgres' }>,
  opts: { application: string; statementTimeoutMs: number },
): Promise<{ kysely: Kysely<Database>; pool: pg.Pool; close: (via: Kysely<Database>) => Promise<void> }> {
  const clients = new Set<pg.PoolClient>();
  const pool = await openPool(config, { ...opts, clients });
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    kysely,
    pool,
    close: async (via) => {
      // The pool ends once every connection is given back: its statements are cancelled until
      // then (a connection that was still opening when the close began may start one after a
      // first round; cancelling an idle backend does nothing).
      const ended = (pool.ending ? Promise.resolve() : pool.end()).catch(() => {});
      let done = false;
      void ended.then(() => (done = true));
      while (!done) {
        const pids = backendPids(clients);
        if (pids.length > 0) await sql`SELECT pg_cancel_backend(pid) FROM unnest(${pids}::int[]) AS pid`.execute(via).catch(() => {});
        await Promise.race([ended, new Promise((r) => setTimeout(r, 200))]);
      }
      await ended;
    },
  };
}

/** The server processes of the pool's connections. */
function backendPids(clients: ReadonlySet<pg.PoolClient>): number[] {
  return [...clients].map((c) => (c as pg.PoolClient & { processID?: number }).processID).filter((pid): pid is number => typeof pid === 'number');
}

/** `pg_terminate_backend` of each pid, through a new connection; gives up after `timeoutMs`. */
async function terminateBackends(pool: pg.Pool, pids: readonly number[], timeoutMs: number): Promise<void> {
  if (pids.length === 0) return;
  const client = new pg.Client({ ...pool.options, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      (async () => {
        await client.connect();
        await client.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
      })().catch(() => {}),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
  } finally {
    clearTimeout(timer);
    void client.end().catch(() => {});
  }
}

async function openPool(
  config: Extract<Config['database'], { kind: 'postgres' }>,
  opts: { application: string; statementTimeoutMs?: number; clients?: Set<pg.PoolClient> },
): Promise<pg.Pool> {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: config.poolSize,
    types: pgTypes,
    application_name: opts.application,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    // Run on each new connection before it is handed out (a failure drops it and fails the
    // checkout); set this way rather than as a start-up parameter, so that neither
    // DATABASE_URL's options nor the database's own setting override it (0 too: no timeout).
    ...(opts.statementTimeoutMs !== undefined ? { onConnect: statementTimeout(opts.statementTimeoutMs) } : {}),
  });
  // A connection dropped by the server (restart, pg_terminate_backend) must not crash the process;
  // the query that was using it fails and is retried by its caller.
  pool.on('error', () => {});
  // Every connection the pool has, when asked for (connectRequestPool cancels their statements).
  const clients = opts.clients;
  if (clients !== undefined) pool.on('remove', (client) => clients.delete(client));
  pool.on('connect', (client) => {
    clients?.add(client);
    client.on('error', () => {});
  });
  // Connected once now: a server that cannot be reached is reported with the setting to check.
  try {
    (await pool.connect()).release();
  } catch (err) {
    await pool.end().catch(() => {});
    throw new Error(`DATABASE_URL: cannot connect to ${withoutPassword(config.url)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return pool;
}

function statementTimeout(ms: number): (client: pg.ClientBase) => Promise<void> {
  const text = `SET statement_timeout = ${Math.max(0, Math.floor(ms))}`;
  return async (client) => {
    await client.query(text);
  };
}

/** Creates and locks the embedded database's directory; a path that cannot be one is reported as DATA_DIR's. */
function openDataDir(dataDir: string): () => void {
  let unlock: () => void;
  try {
    mkdirSync(dataDir, { recursive: true });
    unlock = acquireDataDirLock(dataDir);
  } catch (err) {
    if (err instanceof DataDirInUseError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'EEXIST' || code === 'ENOTDIR' ? 'not a directory' : err instanceof Error ? err.message : String(err);
    throw new Error(`DATA_DIR: cannot use ${dataDir}: ${why}`, { cause: err });
  }
  // Held by the lock: a first start creating the database here is not seen half-done.
  try {
    refuseForeignDataDir(dataDir);
  } catch (err) {
    unlock();
    throw err;
  }
  return unlock;
}

/**
 * A directory with files but no `PG_VERSION` is not an embedded database: one of another program
 * (DATA_DIR pointed at the wrong place), or one damaged. PGlite would create a database over it,
 * mingling its files and, for a damaged one, starting afresh as if its data had never been.
 * Only an empty (or new) directory gets a new database. Dot files (`.gitkeep`) and the lock's
 * own files (`mailtally.pid`, and one a start killed while taking a stale lock over left) do not count.
 */
function refuseForeignDataDir(dataDir: string): void {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  const files = readdirSync(dataDir).filter((name) => !name.startsWith(DATA_DIR_PID_FILE) && !name.startsWith('.'));
  if (files.length === 0) return;
  const shown = files.slice(0, 3).join(', ') + (files.length > 3 ? ', …' : '');
  throw new Error(
    `DATA_DIR: ${dataDir} holds files (${shown}) but no embedded database (it has no PG_VERSION): refusing to create one among them. ` +
      'Point DATA_DIR at a new or empty directory; if it held mailtally\'s database, that database is damaged: restore the directory from a backup.',
  );
}

/** PGlite's failure to open `dataDir`, naming DATA_DIR: its own message says neither which directory nor what to do. */
function cannotOpen(dataDir: string, err: unknown): Error {
  const why = err instanceof Error ? err.message : String(err);
  return new Error(
    `DATA_DIR: the embedded database in ${dataDir} could not be opened (${why}). Is it damaged, or another program's (a Postgres server's data directory cannot be opened embedded)? ` +
      'A new or empty DATA_DIR starts a new database.',
    { cause: err },
  );
}
