import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/processes.js';
import { createTestDatabase } from '../../support/services.js';

const run = promisify(execFile);

/** The modules a fresh process loads to connect to `target` and run a query. */
async function modulesLoadedFor(target: string): Promise<string[]> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/support/connect-and-list-modules.ts', target], { cwd: REPO_ROOT, env: { ...process.env, NODE_OPTIONS: '' } });
  return JSON.parse(stdout) as string[];
}

const EMBEDDED_ONLY = ['/node_modules/@electric-sql/pglite/', '/node_modules/kysely-pglite/', '/node_modules/jiti/', '/src/db/pglite-dialect.ts'];
const loadsAny = (modules: string[], parts: string[]) => parts.filter((p) => modules.some((m) => m.includes(p)));

describe('the embedded database code is loaded only for the embedded database', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-pglite-load-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('a Postgres connection loads none of PGlite, kysely-pglite and what they bring', async () => {
    const database = await createTestDatabase();
    try {
      const modules = await modulesLoadedFor(database.url);
      // The recorder saw the Postgres driver load: it was listening.
      expect(modules.some((m) => m.includes('/node_modules/pg/'))).toBe(true);
      expect(loadsAny(modules, EMBEDDED_ONLY)).toEqual([]);
    } finally {
      await database.drop();
    }
  }, 60_000);

  it('an embedded connection loads them', async () => {
    const modules = await modulesLoadedFor(dataDir);
    expect(loadsAny(modules, ['/node_modules/@electric-sql/pglite/', '/node_modules/kysely-pglite/', '/src/db/pglite-dialect.ts'])).toHaveLength(3);
  }, 60_000);
});
