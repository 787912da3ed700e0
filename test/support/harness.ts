import { Writable } from 'node:stream';
import { type Config, loadConfig } from '../../src/config.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createApiKey, type CreatedApiKey } from '../../src/keys/key-store.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { type Role, type Service, startService } from '../../src/main.js';
import { jetstreamManager } from '@nats-io/jetstream';
import type { FastifyInstance } from 'fastify';
import { connect } from '@nats-io/transport-node';
import { NATS_URL, createTestDatabase, uniqueName } from './services.js';

/** Everything one test file needs: its own database, its own NATS stream and subjects. */
export interface TestEnv {
  /** Environment variables that point a mailtally process at this file's database and stream. */
  env: Record<string, string>;
  config: Config;
  db: Db;
  key: CreatedApiKey;
  subject: (apiKeyId: string, event: string) => string;
  cleanup: () => Promise<void>;
}

export async function createTestEnv(overrides: Record<string, string> = {}): Promise<TestEnv> {
  const database = await createTestDatabase();
  const suffix = uniqueName('t').slice(2);
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    NATS_URL,
    NATS_STREAM: `T_${suffix}`,
    NATS_SUBJECT_PREFIX: `t${suffix}.events`,
    NATS_CONSUMER: `ingest_${suffix}`,
    PORT: '0',
    LOG_LEVEL: 'warn',
    INGEST_ACK_WAIT_MS: '3000',
    ...overrides,
  };
  const config = loadConfig(env);
  const db = await connectDb(config.database);
  await migrateToLatest(db.kysely);
  const key = await createApiKey(db.kysely);
  return {
    env,
    config,
    db,
    key,
    subject: (apiKeyId, event) => `${env['NATS_SUBJECT_PREFIX']}.${apiKeyId}.${event}`,
    cleanup: async () => {
      await db.close();
      await database.drop();
      await deleteStream(env['NATS_STREAM'] as string);
    },
  };
}

export const quietLogger = () => createLogger('silent');

/** A logger whose lines the test reads back, parsed (`msg`, `level` 30 info, 40 warn…). */
export function capturingLogger(level = 'info'): { log: Logger; lines: () => Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger(level, 'mailtally', sink), lines: () => [...lines] };
}

/** Polls `check` until it returns true, or fails after `timeoutMs` with `what` in the message. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Rows in the log (and dead letters) right now. */
export async function countRows(db: Db, table: 'events' | 'dead_letters'): Promise<number> {
  const row = await db.kysely.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

async function deleteStream(name: string): Promise<void> {
  const nc = await connect({ servers: NATS_URL });
  try {
    await (await jetstreamManager(nc)).streams.delete(name);
  } catch {
    // never created, or already gone
  } finally {
    await nc.close();
  }
}

/**
 * The service in this test's process, on its database without NATS (events come over HTTP),
 * with `overrides` on the test's environment; `app` is its HTTP server, for `inject()`.
 */
export async function startHttpService(t: TestEnv, roles: Role[], overrides: Record<string, string> = {}, log: Logger = quietLogger()): Promise<{ service: Service; app: FastifyInstance }> {
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  const service = await startService(loadConfig({ ...withoutNats, ...overrides }), roles, log);
  return { service, app: service.http as FastifyInstance };
}
