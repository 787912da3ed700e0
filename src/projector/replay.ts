import { randomUUID } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import type { Projection } from '../../projections/kit/types.js';
import { DEFAULT_REPLAY_COUNTER_ROWS } from '../config.js';
import type { Db } from '../db/connect.js';
import type { Database } from '../db/schema.js';
import { inTransactionIfLocksCome, LOCK_WAIT_MS } from '../db/lock-timeout.js';
import { logHead } from '../log/read.js';
import { holdLeases, REPLAY_LEASE_MS } from '../log/leases.js';
import { computeBatch, type Cursor } from './batch.js';
import { compareWithLive, type TableDifference } from './compare-with-live.js';
import { CounterSpill, SPILL } from './counter-spill.js';
import type { Fence } from './fence.js';
import { createShadowStatements, loadCountersAndIndex } from './finish-shadows.js';
import { foldLog } from './fold-log.js';
import { buildShadowsBySql, hasSetBasedSql } from './set-rebuild.js';
import { openShadowRows } from './shadow-rows.js';
import { stopPoint } from './stop-point.js';
import { SWAP_LOCK_TIMEOUT_MS, SWAP_WAIT_MS, swapWhenFree } from './swap.js';
import { execAll, SHADOW } from './tables.js';
import { writeDeltasWithin } from './write-delta.js';

export type ReplayPhase = 'read' | 'build' | 'fold' | 'write' | 'index' | 'catch-up' | 'wait' | 'swap';

export interface ReplayProgress {
  phase: ReplayPhase;
  /** 'wait': seconds waited for the swap's locks, of `total` at most. */
  done: number;
  total: number;
  /** 'wait': what holds the locks, e.g. "geo_stats, held by pid 4321 (…)". */
  waitingFor?: string;
  /**
   * What `done` tells of the time left. Unset: it grows steadily (positions, groups, rows), so a
   * rate and an ETA hold. 'steps': statements of very unequal lengths counted as they end (a
   * count, no rate). 'none': `done` moves only when the phase's long statements end.
   */
  gauge?: 'steps' | 'none';
}

export interface ReplayOptions {
  /** Events per read while rebuilding (large: the rebuild is a scan). */
  readonly readBatch: number;
  /** Events per step while catching up with appends that came during the rebuild. */
  readonly catchUpBatch: number;
  readonly onProgress?: (p: ReplayProgress) => void;
  readonly signal?: AbortSignal;
  /**
   * 'swap' (default) puts the rebuilt tables in service. 'verify' compares them with the live
   * tables instead (EXCEPT both ways) and drops them: the live tables must be at the same
   * position, i.e. caught up with a log that is not growing.
   */
  readonly mode?: 'swap' | 'verify';
  /**
   * Postgres: counter rows the rebuild holds in memory at most before it spills them to the
   * database (see `counter-spill.ts`); default {@link DEFAULT_REPLAY_COUNTER_ROWS} (`REPLAY_COUNTER_ROWS`).
   */
  readonly counterEntries?: number;
  /**
   * PGlite: events folded in memory at a time (the log is read once per partition of this size).
   * Postgres reads the log once, in message order, and folds each message as it passes.
   */
  readonly partitionEvents?: number;
  /**
   * 'sql' (default): projections with set-based SQL are rebuilt by Postgres itself
   * (`set-rebuild.ts`), the others folded. 'fold': every projection folded, group by group, as
   * the live projector does (the tests compare the two).
   */
  readonly engine?: 'sql' | 'fold';
  /** The set-based engine's `work_mem` per statement; default `DEFAULT_REBUILD_WORK_MEM` in set-rebuild.ts. */
  readonly workMem?: string | undefined;
  /** The swap's longest wait for its locks per try; default {@link SWAP_LOCK_TIMEOUT_MS} (see swap.ts). */
  readonly swapLockTimeoutMs?: number;
  /** How long the swap keeps trying before the replay fails; default {@link SWAP_WAIT_MS}. */
  readonly swapWaitMs?: number;
}

export interface ReplayReport {
  projections: string[];
  /** The position the rebuilt tables reflect when swapped in. */
  position: bigint;
  /**
   * Positions appended after `position` by the end of the swap, which the live projector applies
   * from the swapped-in checkpoint: at most about a catch-up step, unless the catch-up stopped
   * gaining on the appends ({@link CATCH_UP_PATIENCE}). Not set in 'verify' mode.
   */
  behind?: number;
  events: number;
  groups: number;
  rows: number;
  /** Times the counter totals were spilled to the database (Postgres; see `counter-spill.ts`). */
  spills: number;
  /** verify mode: per table, rows only in the live table and rows only in the rebuilt one. */
  differences?: Record<string, TableDifference>;
}

/** A replay of `projection` runs elsewhere: its lease is held. */
export class ReplayRunning extends Error {
  constructor(readonly projection: string) {
    super(`A replay of ${projection} is already running (an interrupted one lets go within ${REPLAY_LEASE_MS / 1000} s)`);
  }
}

/** This replay stood still past its leases' time and another replay took them: it stops, leaving the tables to that one. */
export class ReplayOvertaken extends Error {
  constructor(projections: readonly Projection[]) {
    super(
      `This replay of ${projections.map((p) => p.name).join(', ')} stood still for more than ${REPLAY_LEASE_MS / 1000} s (stopped, or its machine frozen) and another replay took its read models over: ` +
        'it stopped without touching the tables that one is building; the live tables are as that one leaves them',
    );
  }
}

/**
 * Rebuilds read models from position 0 without disturbing the live tables: every event is read
 * once, grouped by message (and campaign), folded by each projection into
 * `<table>__shadow`, indexed, caught up with what was appended meanwhile (as long as it gains on
 * the appends: the live projector applies the rest), then swapped in and
 * its checkpoint set in one transaction, whose locks it waits for a little at a time (swap.ts):
 * reads of the live tables never queue long behind it. A live projector keeps serving the old
 * tables until the swap and then continues from the new checkpoint (its in-flight batch fails
 * its compare-and-set and is retried). Interrupted, it leaves only shadow tables, which the next run
 * drops: safe to rerun.
 */
export async function replay(db: Db, projections: readonly Projection[], options: ReplayOptions): Promise<ReplayReport> {
  const owner = `replay-${randomUUID()}`;
  const leases = await holdLeases(db.leaseConnection(), projections.map((p) => `replay:${p.name}`), owner, REPLAY_LEASE_MS);
  if (!leases.ok) throw new ReplayRunning(leases.taken.slice('replay:'.length));
  // A renewal that finds a lease taken stops the rebuild at its next step, as a Ctrl-C would.
  const signal = options.signal === undefined ? leases.lost : AbortSignal.any([options.signal, leases.lost]);
  try {
    await dropLeftWorkTables(db, PROJECTIONS.filter((p) => !projections.some((q) => q.name === p.name)), owner);
    // Each write of the rebuild commits only while the leases are still its own (fence.ts).
    const fence: Fence = async (on) => {
      if (!(await leases.confirm(on))) throw new ReplayOvertaken(projections);
    };
    return await rebuild(db, projections, { ...options, signal }, fence);
  } catch (err) {
    // Overtaken: the shadow tables are the other replay's now.
    if (err instanceof ReplayOvertaken || leases.lost.aborted || !(await leases.confirm().catch(() => true))) throw new ReplayOvertaken(projections);
    // Stopped (Ctrl-C) or failed: its shadow tables go too, while it still holds their leases.
    // One whose lock does not come within 2 s (someone reads it) is left, and all of them if the
    // database is gone: the next run drops them before it builds.
    for (const t of projections.flatMap((p) => p.tables)) {
      await inTransactionIfLocksCome(db.kysely, LOCK_WAIT_MS, async (trx) => {
        await sql.raw(`DROP TABLE IF EXISTS ${t.name}${SHADOW}`).execute(trx);
      }).catch(() => false);
    }
    throw err;
  } finally {
    await leases.release();
  }
}

/**
 * The work tables a replay could not drop (killed, quit at a second Ctrl-C, its database gone),
 * of projections this run does not rebuild: dropped when no replay of theirs is running, that
 * is when their lease is free. Those of the projections it rebuilds go as it builds.
 */
async function dropLeftWorkTables(db: Db, others: readonly Projection[], owner: string): Promise<void> {
  for (const p of others) {
    const names = p.tables.flatMap((t) => [`${t.name}${SHADOW}`, ...(t.kind === 'counters' ? [`${t.name}${SPILL}`] : [])]);
    const left = await sql<{ name: string }>`SELECT name FROM unnest(${names}::text[]) AS name WHERE to_regclass(name) IS NOT NULL`.execute(db.kysely);
    if (left.rows.length === 0) continue;
    const lease = await holdLeases(db.leaseConnection(), [`replay:${p.name}`], owner, REPLAY_LEASE_MS);
    if (!lease.ok) continue; // a replay of it is running: its tables are its own
    const tables = left.rows.map((r) => r.name).join(', ');
    try {
      // Not if a statement is using them still (a replay whose lease lapsed while its connections were busy).
      await inTransactionIfLocksCome(db.kysely, 0, async (trx) => {
        await sql.raw(`DROP TABLE ${tables}`).execute(trx);
      });
    } finally {
      await lease.release();
    }
  }
}

async function rebuild(db: Db, projections: readonly Projection[], options: ReplayOptions, fence: Fence): Promise<ReplayReport> {
  const progress = options.onProgress ?? (() => {});
  const tables = projections.flatMap((p) => p.tables);
  const head = await logHead(db.kysely);
  const bySql = options.engine === 'fold' ? [] : projections.filter(hasSetBasedSql);
  const byFold = projections.filter((p) => !bySql.includes(p));
  let rows = 0;
  let groupCount = 0;
  let spills = 0;
  if (bySql.length > 0) {
    const built = await buildShadowsBySql(db, bySql, head, progress, options.workMem, options.signal, fence);
    rows += built.rows;
    groupCount = built.groups;
  }
  if (byFold.length > 0) {
    const folded = await foldShadows(db, byFold, head, options, progress, fence);
    rows += folded.rows;
    groupCount = Math.max(groupCount, folded.groups);
    spills = folded.spills;
  }

  // Positions have gaps (an append's duplicates draw one each and are dropped): count the events.
  const events = await countEventsUpTo(db, head);
  const report = { projections: projections.map((p) => p.name), position: head, events, groups: groupCount, rows, spills };
  if (options.mode === 'verify') return { ...report, differences: await compareWithLive(db, tables) };
  const caughtUp = await catchUp(db, projections, head, options, progress, fence);
  await stopPoint(options.signal);
  // Shown while the swap waits for the live tables' locks (a 'wait' phase after each try that times out).
  progress({ phase: 'swap', done: 0, total: 1, gauge: 'steps' });
  const position = await swapWhenFree(db, projections, caughtUp, {
    lockTimeoutMs: options.swapLockTimeoutMs ?? SWAP_LOCK_TIMEOUT_MS,
    waitMs: options.swapWaitMs ?? SWAP_WAIT_MS,
    signal: options.signal,
    catchUp: (from) => catchUp(db, projections, from, options, progress, fence),
    confirm: fence,
    catchUpWithin: db.pool === null ? undefined : (trx, from, to) => catchUpWithin(db, trx, projections, from, to, options.catchUpBatch),
    progress,
  });
  progress({ phase: 'swap', done: 1, total: 1, gauge: 'steps' });
  // What was caught up with counts too: the events the swapped-in read models hold.
  const held = position === head ? report.events : await countEventsUpTo(db, position);
  return { ...report, position, events: held, behind: Number((await logHead(db.kysely)) - position) };
}

/** The fold's rebuild: every event read and folded group by group into the shadow tables. */
async function foldShadows(
  db: Db,
  projections: readonly Projection[],
  head: bigint,
  options: ReplayOptions,
  progress: (p: ReplayProgress) => void,
  fence: Fence,
): Promise<{ rows: number; groups: number; spills: number }> {
  const tables = projections.flatMap((p) => p.tables);
  for (const t of tables) await execAll(db.kysely, [`DROP TABLE IF EXISTS ${t.name}${SHADOW}`, ...CounterSpill.dropStatements(t), ...createShadowStatements(db, t)]);
  // Row tables are written while the log is read and folded (one connection: the reader must
  // not starve); counter tables once the whole log is folded.
  const shadowRows = openShadowRows(db, SHADOW, fence);
  const spill = db.pool !== null ? new CounterSpill(db.pool, options.counterEntries ?? DEFAULT_REPLAY_COUNTER_ROWS, fence) : null;
  try {
    let folded: Awaited<ReturnType<typeof foldLog>>;
    try {
      folded = await foldLog(db, projections, head, options, shadowRows, progress, spill);
      await shadowRows.finish();
    } finally {
      await shadowRows.close();
    }
    const rows = shadowRows.rows + (await loadCountersAndIndex(db, folded.totals, progress, spill, fence));
    return { rows, groups: folded.groups, spills: spill?.spills ?? 0 };
  } finally {
    await spill?.drop();
  }
}


/**
 * Steps of the catch-up in a row that may end no nearer the head than its best so far before it
 * stops: appends are then coming faster than it applies them (a busy machine, a heavy ingest),
 * and a catch-up that waited to reach the head might never end. What is left to apply, the live
 * projector applies after the swap, from the swapped-in checkpoint.
 */
const CATCH_UP_PATIENCE = 3;

/**
 * Applies what was appended since `from` to the shadow tables, until close to the head or no
 * longer gaining on it ({@link CATCH_UP_PATIENCE}). Its progress counts positions from `from`: the
 * total is what was appended since, and grows with the head.
 */
async function catchUp(
  db: Db,
  projections: readonly Projection[],
  from: bigint,
  options: ReplayOptions,
  progress: (p: ReplayProgress) => void,
  fence: Fence,
): Promise<bigint> {
  let position = from;
  let nearest: bigint | null = null;
  let stalled = 0;
  for (;;) {
    await stopPoint(options.signal);
    const head = await logHead(db.kysely);
    const gap = head - position;
    if (gap <= options.catchUpBatch) return position;
    if (nearest === null || gap < nearest) {
      nearest = gap;
      stalled = 0;
    } else if (++stalled >= CATCH_UP_PATIENCE) {
      return position;
    }
    if (position === from) progress({ phase: 'catch-up', done: 0, total: Number(head - from) });
    const cursors: Cursor[] = projections.map((projection) => ({ projection, position }));
    const batch = await computeBatch(db, cursors, options.catchUpBatch);
    if (batch === null) return position;
    // Never into shadow tables another replay took over (this one stood still past its leases).
    await db.kysely.transaction().execute(async (trx) => {
      await writeDeltasWithin(trx, [...batch.deltas.values()], SHADOW);
      await fence(trx);
    });
    position = batch.to;
    // The batch may reach past `head` (appended since it was read).
    progress({ phase: 'catch-up', done: Number(position - from), total: Number((position > head ? position : head) - from) });
  }
}

/**
 * The swap's last catch-up, within its transaction (the live tables and checkpoints held): the
 * shadow tables brought at least to `to`, where the live projector has brought the live ones.
 * Not past one catch-up step, which reads of the live tables would wait for: a replay whose
 * catch-up stopped gaining on a heavy ingest swaps in where it is, behind, and the live
 * projector applies the rest.
 */
async function catchUpWithin(db: Db, trx: Kysely<Database>, projections: readonly Projection[], from: bigint, to: bigint, batchSize: number): Promise<bigint> {
  if (to - from > BigInt(batchSize)) return from;
  let position = from;
  while (position < to) {
    const batch = await computeBatch(db, projections.map((projection) => ({ projection, position })), batchSize);
    if (batch === null) break;
    await writeDeltasWithin(trx, [...batch.deltas.values()], SHADOW);
    position = batch.to;
  }
  return position;
}

/** Events in the log up to `head` (an index-only scan of the positions). */
async function countEventsUpTo(db: Db, head: bigint): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM events WHERE position <= ${head}`.execute(db.kysely);
  return Number(rows[0]?.n ?? 0);
}
