import { createHash } from 'node:crypto';
import { CompiledQuery } from 'kysely';
import type { Db } from '../db/connect.js';

/**
 * The projector's hot statements have a fixed text per shape (parameters carry the data), so
 * on Postgres they run as named prepared statements: parsed and planned once per connection
 * instead of once per batch. PGlite runs them as ordinary parameterized queries.
 */
export interface Statement {
  /** Null: sent unnamed, planned for each call's parameters. */
  readonly name: string | null;
  readonly text: string;
}

export function statement(text: string, opts: { planEachTime?: boolean } = {}): Statement {
  return { name: opts.planEachTime === true ? null : `mailtally_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`, text };
}

/**
 * Below this log position, reads of the log are planned for each call; from it on, prepared.
 * A prepared statement's plan is made once for all parameters and kept for the connection's
 * life, until the table's statistics change. Made while the log was nearly empty (a new
 * database, before autovacuum's first ANALYZE), it scans the whole log on every call and goes
 * on doing so as the log grows: on a fresh database at 1,000 events/s, 2 ms per history read
 * against 0.03 ms planned with the call's own values. Made over a log of this size, with or
 * without statistics, it takes the indexes; and prepared, a read skips its planning (0.07–0.26
 * ms), which in batches of 50 cost Postgres 10 µs more per event.
 */
export const PREPARE_LOG_READS_FROM = 100_000n;

/** A read of the log (see PREPARE_LOG_READS_FROM): `at(position)` gives the statement to run for a read around that position. */
export class LogRead {
  readonly #eachTime: Statement;
  readonly #prepared: Statement;

  constructor(text: string) {
    this.#eachTime = statement(text, { planEachTime: true });
    this.#prepared = statement(text);
  }

  at(position: bigint): Statement {
    return position < PREPARE_LOG_READS_FROM ? this.#eachTime : this.#prepared;
  }
}

export async function run<R>(db: Db, s: Statement, params: readonly unknown[]): Promise<R[]> {
  if (db.pool !== null) return (await db.pool.query<R & object>(s.name === null ? { text: s.text, values: params as unknown[] } : { name: s.name, text: s.text, values: params as unknown[] })).rows;
  return (await db.kysely.executeQuery<R>(CompiledQuery.raw(s.text, params as unknown[]))).rows;
}
