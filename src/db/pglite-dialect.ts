import type { PGlite } from '@electric-sql/pglite';
import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from 'kysely';
import { KyselyPGlite } from 'kysely-pglite';

/**
 * kysely-pglite's dialect with two fixes:
 * - PGlite is a single session, so two kysely transactions running at once would interleave
 *   their statements. A mutex hands the session to one connection holder at a time, the way a
 *   pool of size one would.
 * - PGlite reports `affectedRows`; kysely reads `numAffectedRows`.
 */
export function pgliteDialect(client: PGlite): Dialect {
  const inner = new KyselyPGlite(client).dialect;
  return {
    createAdapter: () => inner.createAdapter(),
    createIntrospector: (db) => inner.createIntrospector(db),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createDriver: () => new ExclusiveDriver(inner.createDriver()),
  };
}

class ExclusiveDriver implements Driver {
  #tail: Promise<void> = Promise.resolve();
  readonly #releases = new Map<DatabaseConnection, () => void>();

  constructor(private readonly inner: Driver) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const previous = this.#tail;
    this.#tail = previous.then(() => held);
    await previous;
    const connection = new AffectedRowsConnection(await this.inner.acquireConnection());
    this.#releases.set(connection, release);
    return connection;
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.inner.beginTransaction(connection, settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(connection);
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction(connection);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    await this.inner.releaseConnection((connection as AffectedRowsConnection).inner);
    const release = this.#releases.get(connection);
    this.#releases.delete(connection);
    release?.();
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}

class AffectedRowsConnection implements DatabaseConnection {
  constructor(readonly inner: DatabaseConnection) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const result = (await this.inner.executeQuery<R>(query)) as QueryResult<R> & { affectedRows?: number };
    return result.affectedRows !== undefined && result.numAffectedRows === undefined
      ? { rows: result.rows, numAffectedRows: BigInt(result.affectedRows) }
      : result;
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}
