import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { KyselyPlugin } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import { type RestApiDeps, registerRestApi } from '../../src/api/register.js';
import { READ_MODELS_CHANNEL, ResponseCache } from '../../src/api/response-cache.js';
import type { Db } from '../../src/db/connect.js';
import { parseExactJson } from '../../src/events/exact-json.js';
import { createServer } from '../../src/http/server.js';
import { type CreatedApiKey, KeyVerifier, createApiKey } from '../../src/keys/key-store.js';
import { replay } from '../../src/projector/replay.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { type Dialect, openMigratedDb } from './databases.js';
import { quietLogger } from './harness.js';
import { append } from './projections.js';

/**
 * A read API over its own database, for `app.inject()` tests: two tenants (a second one to prove
 * isolation), events appended to the log and read models rebuilt from it, and a `get` that
 * returns the status and the body parsed with 64-bit integers kept exact.
 */
export interface ApiFixture {
  db: Db;
  app: FastifyInstance;
  keys: { a: CreatedApiKey; b: CreatedApiKey; readOnly: CreatedApiKey };
  /** Appends raw events for a tenant and rebuilds every read model from the log. */
  given(key: CreatedApiKey, events: readonly Record<string, unknown>[]): Promise<void>;
  get(path: string, key?: CreatedApiKey | null): Promise<ApiResponse>;
  request(method: string, path: string, opts?: { key?: CreatedApiKey | null; body?: unknown; headers?: Record<string, string> }): Promise<ApiResponse>;
  close(): Promise<void>;
}

export interface ApiResponse {
  status: number;
  headers: LightMyRequestResponse['headers'];
  body: unknown;
  text: string;
}

export const basicAuth = (key: CreatedApiKey): string => `Basic ${Buffer.from(`${key.ApiKey}:${key.SecretKey}`).toString('base64')}`;

export interface ApiFixtureOptions {
  dialect?: Dialect;
  limits?: RestApiDeps['limits'];
  extraRoutes?: RestApiDeps['extraRoutes'];
  /** Keep answers until the read models change, as `serve` does by default. */
  cache?: boolean;
  /** Plugins on the API's database handle only, e.g. to see the statements it sends. */
  plugins?: readonly KyselyPlugin[];
}

export async function openApiFixture(opts: ApiFixtureOptions = {}): Promise<ApiFixture> {
  const dialect = opts.dialect ?? 'postgres';
  const limits = opts.limits ?? { rateLimitPerSecond: 0, rateLimitBurst: 1, authFailuresPerMinute: 1000 };
  const { db, cleanup } = await openMigratedDb(dialect);
  await ensureProjectionTables(db.kysely, PROJECTIONS);
  const keys = { a: await createApiKey(db.kysely), b: await createApiKey(db.kysely), readOnly: await createApiKey(db.kysely, { readOnly: true }) };
  const app = createServer({ port: 0, host: '127.0.0.1', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger());
  const cache = opts.cache === true ? new ResponseCache({ maxEntries: 1000, ttlMs: 60_000 }) : null;
  const unlisten = cache !== null ? await db.listen(READ_MODELS_CHANNEL, () => cache.invalidate()) : async () => {};
  registerRestApi(app, {
    db: (opts.plugins ?? []).reduce((k, plugin) => k.withPlugin(plugin), db.kysely),
    verifier: new KeyVerifier(db.kysely),
    limits,
    ...(opts.extraRoutes !== undefined ? { extraRoutes: opts.extraRoutes } : {}),
    ...(cache !== null ? { cache } : {}),
  });
  await app.ready();

  const request: ApiFixture['request'] = async (method, path, opts = {}) => {
    const key = opts.key === undefined ? keys.a : opts.key;
    const headers: Record<string, string> = {
      ...(key !== null ? { authorization: basicAuth(key) } : {}),
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    };
    const res = await app.inject({
      method: method as 'GET',
      url: path,
      headers,
      ...(opts.body !== undefined ? { payload: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) } : {}),
    });
    return { status: res.statusCode, headers: res.headers, text: res.body, body: res.body === '' ? '' : parseExactJson(res.body) };
  };
  return {
    db,
    app,
    keys,
    given: async (key, events) => {
      await append(db, key.APIKeyID, events);
      await replay(db, PROJECTIONS, { readBatch: 10_000, catchUpBatch: 1000 });
    },
    get: (path, key) => request('GET', path, { key: key === undefined ? keys.a : key }),
    request,
    close: async () => {
      await unlisten();
      await app.close();
      await cleanup();
    },
  };
}
