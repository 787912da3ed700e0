import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { registerMetrics } from '../../src/http/metrics.js';
import { migratedDbBehindProxy } from '../support/databases.js';
import type { TcpProxy } from '../support/tcp-proxy.js';

/**
 * /metrics while the database is away: `mailtally_database_up` 0 and no reader lag (the last one
 * known would look current), whether the database refuses connections or stops answering.
 */

let cleanup: () => Promise<void>;
let proxy: TcpProxy;
let db: Db;
let app: FastifyInstance;

beforeAll(async () => {
  ({ db, proxy, cleanup } = await migratedDbBehindProxy());
  app = Fastify();
  registerMetrics(app, { db: db.kysely });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await cleanup?.();
});

const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;
const lagLines = (text: string) => text.split('\n').filter((l) => l.startsWith('mailtally_reader_lag_events{'));

describe('/metrics while the database is away', () => {
  it('says the database is down and shows no lag, then both again once it is back', { timeout: 60_000 }, async () => {
    let text = await scrape();
    expect(text).toMatch(/^mailtally_database_up 1$/m);
    expect(lagLines(text).length).toBe(PROJECTIONS.length);

    await proxy.cut();
    try {
      text = await scrape();
      expect(text).toMatch(/^mailtally_database_up 0$/m);
      expect(lagLines(text)).toEqual([]);
    } finally {
      await proxy.restore();
    }
    text = await scrape();
    expect(text).toMatch(/^mailtally_database_up 1$/m);

    // Not answering at all (a host gone from the network): the scrape does not wait for it.
    proxy.freeze();
    try {
      text = await scrape();
      expect(text).toMatch(/^mailtally_database_up 0$/m);
      expect(lagLines(text)).toEqual([]);
    } finally {
      proxy.thaw();
    }
  });
});
