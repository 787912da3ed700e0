import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { logHead } from '../../src/log/read.js';
import type { Projector } from '../../src/projector/runner.js';
import { sampleEvents } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { type Proc, spawnCli, stopAll } from '../support/processes.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';
import { createTestDatabase } from '../support/services.js';

/**
 * Two projector runners on one database (Postgres: the other runner is a separate process).
 * Leases make exactly one of them apply each projection; when the holder is SIGKILLed mid-way
 * (no clean shutdown, no lease release), the other takes over once the lease expires and
 * continues from the checkpoints: no gap, no double count.
 */
const LEASE_MS = 1500;

describe('two projector runners on Postgres', () => {
  let db: Db;
  let url: string;
  let drop: () => Promise<void>;
  let child: Proc;
  let survivor: Projector | null = null;

  beforeAll(async () => {
    const database = await createTestDatabase();
    ({ url, drop } = database);
    db = await connectDb({ kind: 'postgres', url, poolSize: 5 });
    await migrateToLatest(db.kysely);
  });
  afterAll(async () => {
    await survivor?.stop();
    await stopAll();
    await db.close();
    await drop();
  });

  async function leaseOwners(): Promise<Map<string, string>> {
    const rows = await db.kysely.selectFrom('leases').select(['name', 'owner']).where('name', 'like', 'projection:%').execute();
    return new Map(rows.map((r) => [r.name, r.owner]));
  }

  async function checkpoints(): Promise<bigint[]> {
    const rows = await db.kysely.selectFrom('checkpoints').select('position').where('name', 'in', PROJECTIONS.map((p) => p.name)).execute();
    return rows.map((r) => BigInt(r.position));
  }

  it('only the lease holder applies; after it is killed the other takes over without gaps or double counts', async () => {
    child = spawnCli(['serve', '--roles', 'projector'], {
      env: { DATABASE_URL: url, PORT: '0', LOG_LEVEL: 'info', PROJECTOR_LEASE_MS: String(LEASE_MS), PROJECTOR_BATCH_SIZE: '25', PROJECTOR_POLL_MS: '50' },
    });
    await child.waitFor('every projection lease', () => (child.jsonLines().filter((l) => l['msg'] === 'projection lease acquired').length === PROJECTIONS.length ? true : undefined));
    const owners = await leaseOwners();
    expect(owners.size).toBe(PROJECTIONS.length);
    const childOwner = [...owners.values()][0] as string;
    expect([...owners.values()].every((o) => o === childOwner)).toBe(true);

    survivor = await startProjector(db, { leaseMs: LEASE_MS, batchSize: 200 });
    const second = survivor;
    expect(second.owner).not.toBe(childOwner);

    // 150 messages × 10 events, in 15 appends; the child projects 25 events per batch.
    for (let i = 0; i < 15; i++) {
      const events = Array.from({ length: 10 }, (_, j) => sampleEvents(String(10_000 + i * 10 + j), 1_433_333_949 + (i * 10 + j) * 97)).flat();
      await append(db, '7', events);
    }
    const head = await logHead(db.kysely);
    await waitFor('the child to be part-way', async () => (await checkpoints()).some((p) => p > 0n));
    // A projector-only process still serves /status and /metrics (for probes and scraping).
    const childUrl = child.jsonLines().find((l) => l['msg'] === 'mailtally started')?.['url'];
    expect(typeof childUrl).toBe('string');
    const status = (await (await fetch(`${String(childUrl)}/status`)).json()) as { roles: string[] };
    expect(status.roles).toEqual(['projector']);
    const metrics = await (await fetch(`${String(childUrl)}/metrics`)).text();
    expect(metrics).toMatch(/mailtally_projector_total\{outcome="batches"\} [1-9]/);
    // New messages are not in the group cache yet: each is a miss.
    expect(metrics).toMatch(/mailtally_projector_total\{outcome="cacheMisses"\} [1-9]/);
    // While the child lives, the in-process runner holds nothing and applies nothing.
    expect(second.stats.held).toEqual([]);
    expect(second.stats.batches).toBe(0);

    child.signal('SIGKILL');
    const exit = await child.waitForExit(10_000);
    expect(exit.signal).toBe('SIGKILL');
    const atKill = await checkpoints();
    expect(atKill.some((p) => p < head)).toBe(true); // killed mid-way: there is work left to take over

    await waitFor('the survivor to hold every lease', async () => second.stats.held.length === PROJECTIONS.length, 20_000);
    expect([...(await leaseOwners()).values()].every((o) => o === second.owner)).toBe(true);
    await caughtUp(db);
    expect(second.stats.batches).toBeGreaterThan(0);
    expect(await checkpoints()).toEqual(PROJECTIONS.map(() => head));
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);
});
