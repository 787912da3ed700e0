import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { replay } from '../../src/projector/replay.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { sampleEvents } from '../support/events.js';
import { type Proc, sleep, spawnCli, stopAll } from '../support/processes.js';
import { append, caughtUp, NO_DIFFERENCES, verifyAgainstReplay } from '../support/projections.js';
import { createTestDatabase } from '../support/services.js';

/**
 * Projector processes started together (a deploy, a restart of several replicas) on a log whose
 * `geo` projection changed version: every one starts at once and applies the other projections;
 * in the background one rebuilds geo, the others wait for its swap (not failing, not rebuilding
 * it again), then all take it up, each projection applied by one of them. A reader holding
 * geo_stats keeps the rebuild's swap waiting, so the rebuilds overlap whatever the machine's
 * speed.
 */

const GEO = PROJECTIONS.find((p) => p.name === 'geo');
const REBUILDING = 'rebuilt read models waiting for locks on the live tables to swap in';
const WAITING = 'read models being rebuilt by another process: waiting for it to swap them in';
const NAMES = PROJECTIONS.map((p) => p.name).sort();

let db: Db;
let url: string;
let drop: () => Promise<void>;
let messages = 0;

const appendMessages = async (n: number): Promise<void> => {
  for (let m = 0; m < n; m++, messages++) await append(db, String(1 + (messages % 2)), sampleEvents(String(9000 + messages), 1_433_333_949 + messages * 977));
};

beforeAll(async () => {
  const database = await createTestDatabase();
  drop = database.drop;
  url = database.url;
  db = await connectDb({ kind: 'postgres', url, poolSize: 4 });
  await migrateToLatest(db.kysely);
  await ensureProjectionTables(db.kysely, PROJECTIONS);
  await appendMessages(20);
  await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
  // Built by the version before this code's.
  await sql`UPDATE projections SET version = version - 1 WHERE name = 'geo'`.execute(db.kysely);
  await sql`UPDATE checkpoints SET version = version - 1 WHERE name = 'geo'`.execute(db.kysely);
});
afterAll(async () => {
  await stopAll();
  await db.close();
  await drop();
});

const logged = (p: Proc, msg: string): boolean => p.jsonLines().some((l) => l['msg'] === msg);

/** Polls until `done`; fails at once, with their output, if one of `procs` exits. */
async function until(what: string, procs: readonly Proc[], done: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await done()) return;
    const exited = procs.find((p) => p.exit !== null);
    if (exited !== undefined) throw new Error(`a projector exited (${JSON.stringify(exited.exit)}) before ${what}\n${exited.describe()}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${procs.map((p) => p.describe()).join('\n')}`);
    await sleep(50);
  }
}

interface ProjectorStatus {
  held: string[];
  rebuilding: string[];
}

async function projectorStatus(p: Proc): Promise<ProjectorStatus> {
  const status = (await (await fetch(`${await p.serverUrl()}/status`)).json()) as { projector: ProjectorStatus };
  return status.projector;
}

const held = async (p: Proc): Promise<string[]> => (await projectorStatus(p)).held;

/** Whether each of `names` is held by exactly one of `procs`, and nothing else is held. */
async function eachHeldOnce(procs: readonly Proc[], names: readonly string[] = NAMES): Promise<boolean> {
  const all = (await Promise.all(procs.map(held))).flat().sort();
  return JSON.stringify(all) === JSON.stringify([...names].sort());
}

describe('projectors started together on a log whose projection version changed', () => {
  it('all start at once: one rebuilds in the background, the others wait for its swap (a SIGTERM then stops one cleanly), then all take it up', async () => {
    const blocker = new pg.Client({ connectionString: url });
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT count(*) FROM geo_stats');
    const env = { DATABASE_URL: url, PORT: '0', LOG_LEVEL: 'info', PROJECTOR_LEASE_MS: '1000' };
    const procs = [0, 1, 2].map(() => spawnCli(['serve', '--roles', 'projector'], { env }));
    let rebuilder: Proc;
    let waiters: Proc[];
    try {
      await until('one rebuilding and two waiting for it', procs, () => procs.filter((p) => logged(p, REBUILDING)).length === 1 && procs.filter((p) => logged(p, WAITING)).length === 2);
      rebuilder = procs.find((p) => logged(p, REBUILDING)) as Proc;
      waiters = procs.filter((p) => p !== rebuilder);
      // Every one starts while geo's swap cannot happen, holding geo back and the others between them.
      await until('every one started', procs, () => procs.every((p) => logged(p, 'mailtally started')));
      await until('the other projections held', procs, () => eachHeldOnce(procs, NAMES.filter((n) => n !== 'geo')));
      for (const p of procs) expect((await projectorStatus(p)).rebuilding).toEqual(['geo']);

      // A waiting one stops at SIGTERM, its wait with it.
      const stopped = waiters.pop() as Proc;
      expect(await stopped.stop(20_000)).toEqual({ code: 0, signal: null });
      expect(logged(stopped, 'stopped')).toBe(true);
      expect(stopped.jsonLines().filter((l) => (l['level'] as number) >= 50)).toEqual([]);
    } finally {
      await blocker.query('COMMIT').catch(() => {});
      await blocker.end();
    }

    const running = [rebuilder, ...waiters];
    // Each read model goes to whichever lease came first: usually one process holds them all and
    // the other none, but started together they may split them, which is as good.
    await until('geo taken up', running, async () => (await Promise.all(running.map(projectorStatus))).every((s) => s.rebuilding.length === 0) && (await eachHeldOnce(running)));
    // Rebuilt once, by the one; its swap recorded this code's version.
    const waiter = waiters[0] as Proc;
    expect(logged(waiter, 'read models rebuilt by another process: swapped in')).toBe(true);
    expect(logged(waiter, REBUILDING)).toBe(false);
    for (const p of running) expect(logged(p, 'rebuilt read models taken up: applying them')).toBe(true);
    const versions = await sql<{ built: number; checkpoint: number }>`
      SELECT p.version AS built, c.version AS checkpoint FROM projections p JOIN checkpoints c USING (name) WHERE name = 'geo'`.execute(db.kysely);
    expect(versions.rows).toEqual([{ built: GEO?.version, checkpoint: GEO?.version }]);
    await appendMessages(5);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);

    // When one stops, the other applies every projection.
    expect(await rebuilder.stop(20_000)).toEqual({ code: 0, signal: null });
    await until('the other holding every projection', [waiter], async () => (await held(waiter)).length === NAMES.length);
    await appendMessages(5);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
    expect(waiter.exit).toBeNull();
  }, 180_000);
});
