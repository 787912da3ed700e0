import type { PGlite } from '@electric-sql/pglite';
import type { DatabaseConnection, Dialect, Driver, TransactionSettings } from 'kysely';
import { KyselyPGlite } from 'kysely-pglite';

/**
 * kysely-pglite's dialect with one fix: PGlite is a single session, so two kysely transactions
 * running at once would interleave their statements. A mutex hands the session to one
 * connection holder at a time, the way a pool of size one would.
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
    const connection = await this.inner.acquireConnection();
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
    await this.inner.releaseConnection(connection);
    const release = this.#releases.get(connection);
    this.#releases.delete(connection);
    release?.();
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}
