import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { registerStatusRoute } from '../../src/http/status-route.js';
import { EXACT_DEAD_LETTER_COUNT } from '../../src/log/dead-letters.js';
import { openMigratedDb } from '../support/databases.js';
import { queryCounter } from '../support/query-counter.js';

/**
 * GET /status takes no credentials, so what it costs the database must not grow with the
 * requests or with the dead letters: concurrent requests share one reading, and the dead-letter
 * count is exact only up to EXACT_DEAD_LETTER_COUNT.
 */

let db: Db;
let cleanup: () => Promise<void>;
let app: FastifyInstance;
/** Counts the statements the route sends. */
const queries = queryCounter();

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
  app = Fastify();
  registerStatusRoute(app, { db: db.kysely.withPlugin(queries.plugin), roles: ['api'] });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await cleanup?.();
});

const status = async () => {
  const res = await app.inject({ method: 'GET', url: '/status' });
  expect(res.statusCode).toBe(200);
  return res.json() as { deadLetters: number; deadLettersExact: boolean };
};

describe('GET /status', () => {
  it('answers concurrent requests from at most two readings of the database', async () => {
    queries.reset();
    const answers = await Promise.all(Array.from({ length: 50 }, status));
    expect(answers.every((a) => a.deadLetters === 0 && a.deadLettersExact)).toBe(true);
    // The first request's reading, and the next one, shared by the requests that came during
    // it; each reading is three statements (the log head, the checkpoints, the dead letters).
    expect(queries.count).toBeGreaterThanOrEqual(3);
    expect(queries.count).toBeLessThanOrEqual(6);
  });

  it('answers what was there when the request arrived', async () => {
    const before = await status();
    await sql`INSERT INTO dead_letters (source, reason, raw) VALUES ('http', 'test', '\\x00'::bytea)`.execute(db.kysely);
    expect((await status()).deadLetters).toBe(before.deadLetters + 1);
    await sql`DELETE FROM dead_letters`.execute(db.kysely);
  });

  it('counts dead letters exactly up to its bound, then gives the estimate', async () => {
    const insert = (n: number) => sql`INSERT INTO dead_letters (source, reason, raw) SELECT 'http', 'test', '\\x00'::bytea FROM generate_series(1, ${n})`.execute(db.kysely);
    await insert(EXACT_DEAD_LETTER_COUNT);
    expect(await status()).toMatchObject({ deadLetters: EXACT_DEAD_LETTER_COUNT, deadLettersExact: true });
    await insert(2_000);
    await sql`ANALYZE dead_letters`.execute(db.kysely);
    const past = await status();
    expect(past.deadLettersExact).toBe(false);
    expect(past.deadLetters).toBeGreaterThan(EXACT_DEAD_LETTER_COUNT);
    expect(past.deadLetters).toBeGreaterThanOrEqual(11_000);
    expect(past.deadLetters).toBeLessThanOrEqual(13_000);
  });
});
