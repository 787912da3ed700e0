import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, REPO_ROOT } from '../support/processes.js';
import { deleteStreamQuietly } from '../support/jetstream.js';
import { createTestDatabase, NATS_URL, uniqueName } from '../support/services.js';

const run = promisify(execFile);

/**
 * A process loads the code of what it runs and no more: the embedded database's only for the
 * embedded database, each role's only when it runs (memory and start-up time of every process).
 */

/** The modules a fresh process loads for `mode` (see test/support/list-loaded-modules.ts). */
async function modulesLoaded(mode: 'connect' | 'serve', target: string, env: Record<string, string> = {}): Promise<string[]> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/support/list-loaded-modules.ts', mode, target], {
    cwd: REPO_ROOT,
    env: childEnv({ NODE_OPTIONS: '', ...env }),
  });
  return JSON.parse(stdout) as string[];
}

/** Which of `parts` (path fragments) some loaded module's URL contains. */
const loaded = (modules: string[], parts: string[]) => parts.filter((p) => modules.some((m) => m.includes(p)));

const EMBEDDED = ['/node_modules/@electric-sql/pglite/', '/node_modules/kysely-pglite/', '/src/db/pglite-dialect.ts'];
const API = '/src/api/register.ts';
const DISPATCHER = '/src/webhooks/dispatcher.ts';
const PROJECTOR = '/src/projector/runner.ts';
const NATS_INGEST = '/src/ingest/nats-ingest.ts';

describe('what a process loads', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-pglite-load-'));
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a Postgres connection loads none of PGlite, kysely-pglite and the TypeScript loader it brings', async () => {
    const modules = await modulesLoaded('connect', database.url);
    // The recorder saw the Postgres driver load: it was listening.
    expect(loaded(modules, ['/node_modules/pg/'])).toHaveLength(1);
    expect(loaded(modules, [...EMBEDDED, '/node_modules/jiti/'])).toEqual([]);
  }, 60_000);

  it('an embedded connection loads them', async () => {
    expect(loaded(await modulesLoaded('connect', dataDir), EMBEDDED)).toEqual(EMBEDDED);
  }, 60_000);

  it('each role loads its own code and not the others\u2019', async () => {
    const env = { DATABASE_URL: database.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' };
    const all = [API, DISPATCHER, PROJECTOR];
    const dispatcher = await modulesLoaded('serve', 'dispatcher', env);
    expect(loaded(dispatcher, all)).toEqual([DISPATCHER]);
    expect(loaded(dispatcher, ['/node_modules/undici/', '/node_modules/@nats-io/'])).toEqual(['/node_modules/undici/']);
    expect(loaded(await modulesLoaded('serve', 'api', env), all)).toEqual([API]);
    expect(loaded(await modulesLoaded('serve', 'projector', env), all)).toEqual([PROJECTOR]);
    // Every role together loads them all, and the NATS consumer only for the ingest role with NATS configured.
    const every = await modulesLoaded('serve', 'api,projector,dispatcher,ingest', env);
    expect(loaded(every, all)).toEqual(all);
    expect(loaded(every, [NATS_INGEST])).toEqual([]);
    const stream = uniqueName('MT_LOADING').toUpperCase();
    try {
      const nats = { NATS_URL, NATS_STREAM: stream, NATS_SUBJECT_PREFIX: stream.toLowerCase() };
      const ingest = await modulesLoaded('serve', 'ingest', { ...env, ...nats });
      expect(loaded(ingest, [NATS_INGEST, ...all])).toEqual([NATS_INGEST]);
      expect(loaded(ingest, ['/node_modules/undici/', '/node_modules/@nats-io/'])).toEqual(['/node_modules/@nats-io/']);
    } finally {
      await deleteStreamQuietly(NATS_URL, stream);
    }
  }, 120_000);
});
