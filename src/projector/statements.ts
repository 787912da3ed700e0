import { createHash } from 'node:crypto';
import { CompiledQuery } from 'kysely';
import type { Db } from '../db/connect.js';

/**
 * The projector's hot statements have a fixed text per shape (parameters carry the data), so
 * on Postgres they run as named prepared statements: parsed and planned once per connection
 * instead of once per batch. PGlite runs them as ordinary parameterized queries.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function statement(text: string): Statement {
  return { name: `mailtally_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`, text };
}

export async function run<R>(db: Db, s: Statement, params: readonly unknown[]): Promise<R[]> {
  if (db.pool !== null) return (await db.pool.query<R & object>({ name: s.name, text: s.text, values: params as unknown[] })).rows;
  return (await db.kysely.executeQuery<R>(CompiledQuery.raw(s.text, params as unknown[]))).rows;
}
