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
 * `geo` projection changed version: one rebuilds it, the others wait for its swap instead of
 * exiting (under `restart: unless-stopped` they would crash-loop until the rebuild ended), then
 * run beside it as standbys. A reader holding geo_stats keeps the rebuild's swap waiting, so the
 * starts overlap whatever the machine's speed.
 */

const GEO = PROJECTIONS.find((p) => p.name === 'geo');
const REBUILDING = 'rebuilt read models waiting for locks on the live tables to swap in';
const WAITING = 'read models being rebuilt by another process: waiting for it to swap them in';

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

async function held(p: Proc): Promise<string[]> {
  const status = (await (await fetch(`${await p.serverUrl()}/status`)).json()) as { projector?: { held?: string[] } };
  return status.projector?.held ?? [];
}

describe('projectors started together on a log whose projection version changed', () => {
  it('all survive: one rebuilds, the others wait for its swap (a SIGTERM then stops one cleanly), then run as standbys', async () => {
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
      // A waiting one stops at SIGTERM, as any start does.
      const stopped = waiters.pop() as Proc;
      stopped.signal('SIGTERM');
      expect(await stopped.waitForExit(20_000)).toEqual({ code: 0, signal: null });
      expect(logged(stopped, 'stopped before it had started')).toBe(true);
    } finally {
      await blocker.query('COMMIT').catch(() => {});
      await blocker.end();
    }

    const running = [rebuilder, ...waiters];
    await until('both started', running, () => running.every((p) => logged(p, 'mailtally started')));
    // Rebuilt once, by the one; its swap recorded this code's version.
    expect(logged(waiters[0] as Proc, 'read models rebuilt by another process: starting')).toBe(true);
    expect(logged(waiters[0] as Proc, REBUILDING)).toBe(false);
    const versions = await sql<{ built: number; checkpoint: number }>`
      SELECT p.version AS built, c.version AS checkpoint FROM projections p JOIN checkpoints c USING (name) WHERE name = 'geo'`.execute(db.kysely);
    expect(versions.rows).toEqual([{ built: GEO?.version, checkpoint: GEO?.version }]);

    // One runs every projection, the other stands by.
    const names = PROJECTIONS.map((p) => p.name).sort();
    const heldBy = async () => (await Promise.all(running.map(held))).map((h) => [...h].sort());
    await until('one holding every projection, the other none', running, async () => {
      const h = await heldBy();
      return h.some((x) => x.length === names.length) && h.some((x) => x.length === 0);
    });
    expect((await heldBy()).sort((a, b) => b.length - a.length)).toEqual([names, []]);
    await appendMessages(5);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);

    // The standby takes over when the active one stops.
    const active = (await heldBy())[0]?.length === names.length ? (running[0] as Proc) : (running[1] as Proc);
    const standby = running.find((p) => p !== active) as Proc;
    expect(await active.stop(20_000)).toEqual({ code: 0, signal: null });
    await until('the standby holding every projection', [standby], async () => (await held(standby)).length === names.length);
    await appendMessages(5);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
    expect(standby.exit).toBeNull();
  }, 180_000);
});
