import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { ENGAGEMENT_SELECT, FACTS_SELECT } from '../../projections/kit/sql.js';
import type { Projection, TableSpec } from '../../projections/kit/types.js';
import { WORK_MEM_PATTERN } from '../config.js';
import { LOG_COLUMNS } from '../log/columns.js';
import { FOLDED_EMAIL_SQL } from './read-groups.js';
import type { Db } from '../db/connect.js';
import { holdLeases, REPLAY_LEASE_MS } from '../log/leases.js';
import type { Fence } from './fence.js';
import { keyStatements, runTasks, type Task } from './finish-shadows.js';
import type { ReplayProgress } from './replay.js';
import { stopPoint } from './stop-point.js';
import { allColumns, createIndexStatements, createTableStatements, execAll, SHADOW, sumByKeySql } from './tables.js';

/**
 * A rebuild computed by Postgres itself: each projection's set-based SQL (`sql` in its file; see
 * `projections/kit/sql.ts`) fills its shadow tables straight from the log, and no event leaves
 * the server.
 *
 * 1. The relations every projection's SQL reads, as unlogged tables of this run: `facts`, one
 *    row per message (a `GROUP BY` over the log up to `head`; on Postgres two halves of the
 *    messages at once, each on a server process of its own), then `engagement`, the opens,
 *    clicks, bounces… with their message's facts.
 * 2. Each table: one `INSERT … SELECT` into its bare shadow (a counter table's contributions
 *    added up by key, all-zero rows left out, as the fold does), then its primary key and
 *    indexes, each built by sorting the loaded rows. On Postgres two statements run at a time,
 *    largest tables first; those that need only `facts` start while `engagement` is built.
 *
 * The run's tables are dropped at the end; those an interrupted run left (its lease gone) are
 * dropped by the next run.
 */

/**
 * Memory each statement may use for its hash tables and sorts (Postgres's `work_mem`; on
 * Postgres two statements run at once, and a hash table may take twice this, Postgres's
 * `hash_mem_multiplier`). Past it a statement spills to disk, as slower but the same numbers.
 * The embedded database (WebAssembly) gets less.
 */
export const DEFAULT_REBUILD_WORK_MEM = { postgres: '256MB', pglite: '64MB' } as const;

const RUN_TABLE = /^replay_(facts|engagement)_([0-9a-f]{12})$/;
const LEASE_PREFIX = 'replay-run:';

export interface SetRebuildResult {
  /** Rows written into the shadow tables. */
  readonly rows: number;
  /** Message groups (rows of `facts`) and campaign groups. */
  readonly groups: number;
}

/** A projection a set-based rebuild can build: every table has its SQL. */
export function hasSetBasedSql(p: Projection): boolean {
  return p.sql !== undefined && p.tables.every((t) => typeof p.sql?.[t.name] === 'string');
}

interface Table {
  readonly spec: TableSpec;
  readonly select: string;
}

/** The run's tables holding the relations of `kit/sql.ts`. */
interface Relations {
  readonly facts: string;
  readonly engagement: string;
}

export async function buildShadowsBySql(
  db: Db,
  projections: readonly Projection[],
  head: bigint,
  progress: (p: ReplayProgress) => void,
  workMem?: string,
  signal?: AbortSignal,
  fence?: Fence,
): Promise<SetRebuildResult> {
  const missing = projections.filter((p) => !hasSetBasedSql(p));
  if (missing.length > 0) throw new Error(`No set-based SQL for every table of ${missing.map((p) => p.name).join(', ')}`);
  await dropOrphanTables(db);
  const run = randomBytes(6).toString('hex');
  const relations: Relations = { facts: `replay_facts_${run}`, engagement: `replay_engagement_${run}` };
  const owner = `replay-${run}`;
  const lease = await holdLeases(db.leaseConnection(), [LEASE_PREFIX + run], owner, REPLAY_LEASE_MS);
  if (!lease.ok) throw new Error(`replay run ${run} is taken`);
  const memory = workMem ?? (db.pool !== null ? DEFAULT_REBUILD_WORK_MEM.postgres : DEFAULT_REBUILD_WORK_MEM.pglite);
  if (!WORK_MEM_PATTERN.test(memory)) throw new Error(`work_mem ${memory}: not a Postgres memory size`);
  const exec = executor(db, memory, signal, fence);
  const concurrency = db.pool !== null ? 2 : 1;
  try {
    const tables: Table[] = projections.flatMap((p) => p.tables.map((spec) => ({ spec, select: p.sql?.[spec.name] as string })));
    for (const { spec } of tables) await execAll(db.kysely, [`DROP TABLE IF EXISTS ${spec.name}${SHADOW}`, ...createTableStatements(spec, SHADOW, false, false)]);

    // The facts are two long statements (one on PGlite): nothing to count until they end.
    progress({ phase: 'read', done: 0, total: Number(head), gauge: 'none' });
    const messages = await buildFacts(db, exec, head, relations, concurrency);
    const { rows: campaigns } = await sql<{ n: number }>`
      SELECT count(DISTINCT (api_key_id, campaign_id))::int AS n FROM events WHERE type = 'campaign' AND position <= ${head}`.execute(db.kysely);
    progress({ phase: 'read', done: Number(head), total: Number(head), gauge: 'none' });

    // One phase for `engagement`, the loads, keys and indexes: they run interleaved, two
    // statements at a time, each counted as it ends.
    const readsEngagement = tables.filter((t) => /\bengagement\b/.test(t.select));
    const steps = (readsEngagement.length > 0 ? 1 : 0) + tables.reduce((n, { spec }) => n + 2 + (spec.indexes ?? []).length, 0);
    let done = 0;
    const ended = () => progress({ phase: 'build', done: ++done, total: steps, gauge: 'steps' });
    let rows = 0;
    const index =
      (statements: readonly string[]): Task =>
      async () => {
        await exec(...statements);
        ended();
        return [];
      };
    const build =
      ({ spec, select }: Table): Task =>
      async () => {
        // Two builds run at once: add the count once it is in (`rows += await …` would lose one).
        const n = await exec(insertStatement(spec, select, head, relations));
        rows += n;
        ended();
        return [keyStatements(spec), ...createIndexStatements(spec, SHADOW).map((s) => [s])].map(index);
      };
    progress({ phase: 'build', done: 0, total: steps, gauge: 'steps' });
    // `engagement` first, and the tables that read it once it is in; meanwhile, and after, the
    // others. Largest first: the long ones start while the rest fill in.
    const bySize = (list: Table[]) => [...list].sort((a, b) => weight(b.spec) - weight(a.spec)).map(build);
    const engagement: Task = async () => {
      await buildEngagement(db, exec, head, relations);
      ended();
      return bySize(readsEngagement);
    };
    const others = bySize(tables.filter((t) => !readsEngagement.includes(t)));
    await runTasks(concurrency, readsEngagement.length > 0 ? [engagement, ...others] : others);
    return { rows, groups: messages + (campaigns[0]?.n ?? 0) };
  } finally {
    for (const table of Object.values(relations)) await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db.kysely);
    await lease.release();
  }
}

/** The log's columns as the SQL sees them: the address folded as every projection sees it (read-groups.ts). */
const LOG_SELECT = `position, ${LOG_COLUMNS.map(([name]) => (name === 'email' ? `${FOLDED_EMAIL_SQL} AS email` : name)).join(', ')}, recorded_at`;

/** The log as the SQL sees it: the events up to the rebuild's position (of one share of the messages). */
function logUpTo(head: bigint, share?: { index: number; of: number }): string {
  const part = share === undefined || share.of === 1 ? '' : ` AND (hash_numeric(message_id) & 2147483647) % ${share.of} = ${share.index}`;
  return `SELECT ${LOG_SELECT} FROM events WHERE position <= ${head}${part}`;
}

/**
 * `facts` filled; returns the number of messages. With `concurrency` 2 the messages are split in
 * two by a hash of their id, each half aggregated by a statement of its own while the other runs.
 */
async function buildFacts(db: Db, exec: Exec, head: bigint, relations: Relations, concurrency: number): Promise<number> {
  const { facts, engagement } = relations;
  await execAll(db.kysely, [
    `CREATE UNLOGGED TABLE ${facts} AS WITH log AS NOT MATERIALIZED (${logUpTo(head)}) ${FACTS_SELECT} WITH NO DATA`,
    `CREATE UNLOGGED TABLE ${engagement} AS WITH log AS NOT MATERIALIZED (${logUpTo(head)}), facts AS (SELECT * FROM ${facts}) ${ENGAGEMENT_SELECT} WITH NO DATA`,
  ]);
  let messages = 0;
  const shares = Array.from({ length: concurrency }, (_, index): Task => async () => {
    // A hash table of the messages, not a sort of the log (twice as fast here; the planner
    // picks the sort whenever it fears the hash table outgrows `work_mem`, which it then spills).
    const n = await exec('SET LOCAL enable_sort = off', `INSERT INTO ${facts} WITH log AS NOT MATERIALIZED (${logUpTo(head, { index, of: concurrency })}) ${FACTS_SELECT}`);
    messages += n;
    return [];
  });
  await runTasks(concurrency, shares);
  await sql.raw(`ANALYZE ${facts}`).execute(db.kysely);
  return messages;
}

/** `engagement` filled (once `facts` is). */
async function buildEngagement(db: Db, exec: Exec, head: bigint, relations: Relations): Promise<void> {
  await exec(`INSERT INTO ${relations.engagement} ${relationsSql(head, relations)} ${ENGAGEMENT_SELECT}`);
  await sql.raw(`ANALYZE ${relations.engagement}`).execute(db.kysely);
}

/** The relations of `kit/sql.ts` as a statement's common table expressions. */
function relationsSql(head: bigint, relations: Relations): string {
  return `WITH log AS NOT MATERIALIZED (${logUpTo(head)}), facts AS NOT MATERIALIZED (SELECT * FROM ${relations.facts}), engagement AS NOT MATERIALIZED (SELECT * FROM ${relations.engagement})`;
}

/**
 * One table's load: its rows, or for a counter table its contributions added up by key (sums
 * summed, maxes and mins as such, rows whose sums are all zero left out).
 */
function insertStatement(spec: TableSpec, select: string, head: bigint, relations: Relations): string {
  const columns = allColumns(spec).map((c) => c.name);
  const into = `INSERT INTO ${spec.name}${SHADOW} (${columns.join(', ')}) ${relationsSql(head, relations)}`;
  if (spec.kind === 'rows') return `${into} SELECT ${columns.join(', ')} FROM (${select}) r`;
  return `${into} ${sumByKeySql(spec, `(${select}) c`)}`;
}

/** Runs statements in one transaction; returns the last one's row count. */
type Exec = (...statements: string[]) => Promise<number>;

/**
 * Statements run with `work_mem` raised; none starts once `signal` is aborted (see `stopPoint`),
 * and none commits past the `fence`.
 */
function executor(db: Db, memory: string, signal: AbortSignal | undefined, fence: Fence | undefined): Exec {
  return async (...statements) => {
    await stopPoint(signal);
    return db.kysely.transaction().execute(async (trx) => {
      await sql.raw(`SET LOCAL work_mem = '${memory}'`).execute(trx);
      let n = 0;
      for (const s of statements) n = Number((await sql.raw(s).execute(trx)).numAffectedRows ?? 0n);
      await fence?.(trx);
      return n;
    });
  };
}

/** Rough size order of the tables: one row per event or message first, small aggregates last. */
function weight(spec: TableSpec): number {
  if (spec.name === 'messages') return 5; // one row per message, and ten indexes
  if (spec.name === 'statcounters') return 4;
  if (spec.kind === 'rows') return spec.name === 'campaigns' ? 0 : 3;
  return spec.keys.some((k) => k.name === 'email') ? 2 : 1;
}

/** Tables of runs that are gone (interrupted: their lease expired or was never released). */
async function dropOrphanTables(db: Db): Promise<void> {
  const { rows } = await sql<{ name: string }>`
    SELECT relname AS name FROM pg_class WHERE relkind = 'r' AND relname ~ ${RUN_TABLE.source} AND relnamespace = current_schema()::regnamespace`.execute(db.kysely);
  const { rows: live } = await sql<{ name: string }>`SELECT name FROM leases WHERE name LIKE ${`${LEASE_PREFIX}%`} AND expires_at > now()`.execute(db.kysely);
  const running = new Set(live.map((l) => l.name.slice(LEASE_PREFIX.length)));
  for (const { name } of rows) {
    if (!running.has(RUN_TABLE.exec(name)?.[2] ?? '')) await sql.raw(`DROP TABLE IF EXISTS ${name}`).execute(db.kysely);
  }
}
