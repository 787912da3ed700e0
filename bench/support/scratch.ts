import { randomBytes } from 'node:crypto';
import { type JetStreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import pg from 'pg';

/** Throw-away Postgres databases and NATS streams for one benchmark run. */

export const ADMIN_DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

export const randomSuffix = (): string => randomBytes(4).toString('hex');

export interface ScratchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function createScratchDatabase(prefix = 'mt_bench'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomSuffix()}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return { name, url: url.toString(), drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) };
}

/** Server facts worth keeping next to the figures. */
export async function serverFacts(): Promise<Record<string, string>> {
  return admin(async (c) => {
    const facts: Record<string, string> = {};
    for (const setting of ['server_version', 'shared_buffers', 'max_wal_size', 'synchronous_commit', 'fsync', 'wal_level']) {
      const r = await c.query<{ v: string }>(`SELECT current_setting('${setting}') AS v`);
      facts[setting] = r.rows[0]?.v ?? '?';
    }
    return facts;
  });
}

export interface BenchStream {
  stream: string;
  subjectPrefix: string;
  delete(): Promise<void>;
}

/** A stream configured like the product's (file storage, limits), under unique names. */
export async function createBenchStream(jsm: JetStreamManager): Promise<BenchStream> {
  const suffix = randomSuffix();
  const stream = `BENCH_${suffix}`;
  const subjectPrefix = `bench${suffix}.events`;
  await jsm.streams.add({
    name: stream,
    subjects: [`${subjectPrefix}.>`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(24 * 3600 * 1000),
    duplicate_window: nanos(2 * 60 * 1000),
  });
  return { stream, subjectPrefix, delete: () => jsm.streams.delete(stream).then(() => undefined) };
}
