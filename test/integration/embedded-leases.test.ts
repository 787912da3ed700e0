import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { tryAcquireLease } from '../../src/log/leases.js';

/** The embedded database: one process at a time holds its directory, so the leases it finds there are of processes that ended. */

const dir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-leases-'));
afterAll(async () => {
  // PGlite may still flush its in-memory file system for a moment after close().
  await new Promise((r) => setTimeout(r, 500));
  rmSync(dir, { recursive: true, force: true });
});

describe('embedded database leases', () => {
  it('are let go when the database is opened again, so a killed process holds nothing', async () => {
    const first = await connectDb({ kind: 'pglite', dataDir: dir });
    await migrateToLatest(first.kysely);
    // As a process killed while it projected or replayed leaves them: held a minute more.
    expect(await tryAcquireLease(first.kysely, 'projection:geo', 'killed-projector', 60_000)).toBe(true);
    expect(await tryAcquireLease(first.kysely, 'replay:geo', 'killed-replay', 60_000)).toBe(true);
    await first.close();

    const next = await connectDb({ kind: 'pglite', dataDir: dir });
    try {
      expect(await next.kysely.selectFrom('leases').select('name').execute()).toEqual([]);
      expect(await tryAcquireLease(next.kysely, 'replay:geo', 'next-replay', 60_000)).toBe(true);
    } finally {
      await next.close();
    }
  }, 120_000);
});
