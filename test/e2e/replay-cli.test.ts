import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { type Db, connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { sampleEvents } from '../support/events.js';
import { runCli, stopAll } from '../support/processes.js';
import { append, NO_DIFFERENCES, tableRows, verifyAgainstReplay } from '../support/projections.js';
import { createTestDatabase } from '../support/services.js';

/** `npx mailtally replay` as an operator runs it: rebuilds read models from the log, prints a JSON summary. */

let db: Db;
let env: Record<string, string>;
let drop: () => Promise<void>;

beforeAll(async () => {
  const database = await createTestDatabase();
  drop = database.drop;
  env = { DATABASE_URL: database.url, LOG_LEVEL: 'warn' };
  db = await connectDb({ kind: 'postgres', url: database.url, poolSize: 2 });
  await migrateToLatest(db.kysely);
  // 20 events: two messages (ten events each, one of them a `campaign` event of campaign 7257).
  await append(db, '21', sampleEvents('100'));
  await append(db, '21', sampleEvents('101', 1_433_340_000));
});
afterAll(async () => {
  await stopAll();
  await db.close();
  await drop();
});

const summaryOf = (stdout: string): Record<string, unknown> => JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null') as Record<string, unknown>;
const lifetimeTotals = async () =>
  (await tableRows(db, 'statcounters'))
    .filter((r) => r['timing'] === 'L' && r['source_type'] === 'A')
    .map((r) => ({ tenant: r['api_key_id'], total: r['total'], sent: r['message_sent'], opens: r['event_opened'] }));

describe('mailtally replay', () => {
  let first: Record<string, unknown>;

  it('rebuilds every read model from the log and prints its summary as JSON', async () => {
    const r = await runCli(['replay'], { env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    first = summaryOf(r.stdout);
    expect(first).toMatchObject({ projections: PROJECTIONS.map((p) => p.name), position: 20, events: 20, groups: 3 });
    expect(first['rows']).toEqual(expect.any(Number));
    expect(first['seconds']).toEqual(expect.any(Number));
    expect(r.stderr).toContain('replay: reading the log');
    // Two processed messages, each with its sent and one open.
    expect(await lifetimeTotals()).toEqual([{ tenant: '21', total: '2', sent: '2', opens: '2' }]);
    const checkpoints = await db.kysely.selectFrom('checkpoints').select(['name', 'position']).orderBy('name').execute();
    expect(checkpoints.map((c) => [c.name, Number(c.position)])).toEqual(PROJECTIONS.map((p) => [p.name, 20]).sort());
  });

  it('can run again: same summary, same tables', async () => {
    const before = await Promise.all(PROJECTIONS.flatMap((p) => p.tables.map((t) => tableRows(db, t.name))));
    const r = await runCli(['replay'], { env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(summaryOf(r.stdout)).toMatchObject({ projections: first['projections'], position: 20, events: 20, groups: 3, rows: first['rows'] });
    const after = await Promise.all(PROJECTIONS.flatMap((p) => p.tables.map((t) => tableRows(db, t.name))));
    expect(after).toEqual(before);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });

  it('rebuilds only the projection asked for', async () => {
    const r = await runCli(['replay', '--projection', 'statcounters'], { env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(summaryOf(r.stdout)).toMatchObject({ projections: ['statcounters'], position: 20, events: 20 });
    expect(await lifetimeTotals()).toEqual([{ tenant: '21', total: '2', sent: '2', opens: '2' }]);
  });

  it('refuses an unknown projection with a clear message and the usage error exit code (2)', async () => {
    const r = await runCli(['replay', '--projection', 'statcounters,nope'], { env, timeoutMs: 90_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Unknown projection "nope"');
    expect(r.stderr).toContain('statcounters');
    expect(r.stdout.trim()).toBe('');
    const empty = await runCli(['replay', '--projection', ','], { env, timeoutMs: 90_000 });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--projection needs a projection name');
  });
});

describe('mailtally replay over a log with gaps in its positions', () => {
  it('counts the events, not the positions', async () => {
    // The same 20 events again: stored nothing, but drew positions. Then one new event.
    await append(db, '21', sampleEvents('100'));
    await append(db, '21', sampleEvents('102', 1_433_350_000).slice(0, 1));
    const rows = await db.kysely.selectFrom('events').select([db.kysely.fn.countAll<string>().as('n'), db.kysely.fn.max('position').as('head')]).execute();
    const stored = Number(rows[0]?.n);
    const head = Number(rows[0]?.head);
    expect(stored).toBe(21);
    expect(head).toBeGreaterThan(stored);
    const r = await runCli(['replay', '--projection', 'messages'], { env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(summaryOf(r.stdout)).toMatchObject({ position: head, events: 21 });
  });
});
