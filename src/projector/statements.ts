import { createHash } from 'node:crypto';
import { CompiledQuery } from 'kysely';
import type { Db } from '../db/connect.js';

/**
 * The projector's hot statements have a fixed text per shape (parameters carry the data), so
 * on Postgres they run as named prepared statements: parsed and planned once per connection
 * instead of once per batch. PGlite runs them as ordinary parameterized queries.
 *
 * Reads of the log are the exception (`planEachTime`): a prepared statement's plan is made once
 * for all parameters and kept for the connection's life, until the table's statistics change.
 * Made while the log was nearly empty (a new database, before autovacuum's first ANALYZE), it
 * scans the whole log on every call, and goes on doing so as the log grows: on a fresh database
 * at 1,000 events/s, 2 ms per history read against a few hundredths when planned with the
 * call's own values, which always take the index. Planning each call costs a fraction of that.
 */
export interface Statement {
  /** Null: sent unnamed, planned for each call's parameters. */
  readonly name: string | null;
  readonly text: string;
}

export function statement(text: string, opts: { planEachTime?: boolean } = {}): Statement {
  return { name: opts.planEachTime === true ? null : `mailtally_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`, text };
}

export async function run<R>(db: Db, s: Statement, params: readonly unknown[]): Promise<R[]> {
  if (db.pool !== null) return (await db.pool.query<R & object>(s.name === null ? { text: s.text, values: params as unknown[] } : { name: s.name, text: s.text, values: params as unknown[] })).rows;
  return (await db.kysely.executeQuery<R>(CompiledQuery.raw(s.text, params as unknown[]))).rows;
}
