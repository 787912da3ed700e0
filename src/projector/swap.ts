import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import type { Database } from '../db/schema.js';
import { inTransactionIfLocksCome, LOCK_WAIT_MS } from '../db/lock-timeout.js';
import type { ReplayProgress } from './replay.js';
import { execAll, swapStatements } from './tables.js';

/**
 * Longest wait of one swap try for its locks. Reads of the live tables queue behind a pending
 * ACCESS EXCLUSIVE lock: they wait this long at most, then go on while the swap steps back.
 */
export const SWAP_LOCK_TIMEOUT_MS = LOCK_WAIT_MS;
/** How long the swap keeps trying before it gives up. */
export const SWAP_WAIT_MS = 300_000;
/** First pause between two tries; doubled at each, up to the second, with jitter. */
const RETRY_MS = 250;
const RETRY_MAX_MS = 8_000;

export interface SwapOptions {
  readonly lockTimeoutMs: number;
  readonly waitMs: number;
  readonly signal?: AbortSignal | undefined;
  /** Applies to the shadow tables what was appended after `from`; gives the position reached. */
  readonly catchUp: (from: bigint) => Promise<bigint>;
  /** Within the swap's transaction, before anything else: throws unless the replay's leases are still its own (kept then until it commits). */
  readonly confirm: (trx: Kysely<Database>) => Promise<void>;
  /**
   * Within the swap's transaction, once it holds the live tables and checkpoints: applies to the
   * shadow tables what lies between `from` and `to` (the live checkpoint, ahead of the shadow
   * tables by what the live projector applied since the last catch-up), so the swap does not move
   * a read model back; gives the position reached. Postgres only (it reads the log on other
   * connections), and up to a bound (replay.ts); short of it a swap lands behind the live tables,
   * which the live projector then brings forward again.
   */
  readonly catchUpWithin?: ((trx: Kysely<Database>, from: bigint, to: bigint) => Promise<bigint>) | undefined;
  readonly progress: (p: ReplayProgress) => void;
}

/**
 * Swaps the shadow tables in and sets each checkpoint, atomically, as pg_repack swaps: each try
 * waits for its locks at most `lockTimeoutMs`. One that times out rolls back (the reads queued
 * behind it go on), pauses, catches up with the appends meanwhile and tries again, until
 * `waitMs` has passed. Returns the position swapped in.
 */
export async function swapWhenFree(db: Db, projections: readonly Projection[], position: bigint, options: SwapOptions): Promise<bigint> {
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    const swapped = await trySwap(db, projections, position, options);
    if (swapped !== null) return swapped;
    const holders = await describeHolders(db, projections.flatMap((p) => p.tables.map((t) => t.name)));
    const left = options.waitMs - (Date.now() - started);
    if (left <= 0) {
      throw new Error(
        `Could not swap the rebuilt read models of ${projections.map((p) => p.name).join(', ')} in within ${Math.round(options.waitMs / 1000)} s (${tries} tries): ` +
          `waiting for ${holders}. The live tables are unchanged; run the replay again once that has let go.`,
      );
    }
    options.progress({ phase: 'wait', done: Math.round((Date.now() - started) / 1000), total: Math.round(options.waitMs / 1000), waitingFor: holders });
    const pause = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (tries - 1)) * (0.5 + Math.random() / 2);
    await sleep(Math.min(pause, left), undefined, options.signal !== undefined ? { signal: options.signal } : {}).catch((err: unknown) => {
      options.signal?.throwIfAborted();
      throw err;
    });
    position = await options.catchUp(position);
  }
}

/** One try: the position swapped in, or null if a lock was not granted within `lockTimeoutMs` (nothing changed then). */
async function trySwap(db: Db, projections: readonly Projection[], from: bigint, options: SwapOptions): Promise<bigint | null> {
  let position = from;
  // For every lock this transaction waits for: the leases', the tables' and the checkpoint rows'.
  const swapped = await inTransactionIfLocksCome(db.kysely, options.lockTimeoutMs, async (trx) => {
    await options.confirm(trx);
    // Same lock order as a live runner's batch (tables in registry order, then checkpoints),
    // so the two wait for each other instead of deadlocking.
    const live = projections.flatMap((p) => p.tables.map((t) => t.name));
    await sql.raw(`LOCK TABLE ${live.join(', ')} IN ACCESS EXCLUSIVE MODE`).execute(trx);
    for (const p of projections) {
      // Holding the checkpoint row makes a live runner's compare-and-set wait, then fail.
      await sql`INSERT INTO checkpoints (name, position, version) VALUES (${p.name}, 0, ${p.version}) ON CONFLICT (name) DO NOTHING`.execute(trx);
      await sql`SELECT position FROM checkpoints WHERE name = ${p.name} FOR UPDATE`.execute(trx);
    }
    if (options.catchUpWithin !== undefined) {
      const { rows } = await sql<{ live: string | null }>`SELECT max(position)::text AS live FROM checkpoints WHERE name = ANY(${projections.map((p) => p.name)}::text[])`.execute(trx);
      const live = BigInt(rows[0]?.live ?? '0');
      if (live > position) position = await options.catchUpWithin(trx, position, live);
    }
    for (const p of projections) {
      for (const t of p.tables) await execAll(trx, swapStatements(t));
      // With the version of the code that built the tables: a live runner of another version
      // can no longer write to them (its compare-and-set fails; see runner.ts).
      await sql`UPDATE checkpoints SET position = ${position}, version = ${p.version}, updated_at = now() WHERE name = ${p.name}`.execute(trx);
      await sql`
        INSERT INTO projections (name, version, built_at) VALUES (${p.name}, ${p.version}, now())
        ON CONFLICT (name) DO UPDATE SET version = excluded.version, built_at = excluded.built_at`.execute(trx);
    }
  });
  return swapped ? position : null;
}

/** Who holds a lock on one of `tables` now, for the operator: table, pid, since when, doing what. */
async function describeHolders(db: Db, tables: readonly string[]): Promise<string> {
  const { rows } = await sql<{ table: string; pid: number; since: Date | null; state: string | null; query: string | null }>`
    SELECT l.relation::regclass::text AS table, a.pid, coalesce(a.xact_start, a.query_start) AS since, a.state, left(a.query, 120) AS query
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.granted AND l.locktype = 'relation' AND l.relation = ANY(${tables}::text[]::regclass[]::oid[]) AND l.pid <> pg_backend_pid()
    ORDER BY since NULLS LAST LIMIT 3`.execute(db.kysely);
  if (rows.length === 0) return 'locks on the live tables or their checkpoints (let go before they could be named)';
  return rows.map((r) => `${r.table}, held by pid ${r.pid} (${r.state ?? '?'}, transaction started ${r.since?.toISOString() ?? '?'}: ${r.query ?? '?'})`).join('; ');
}
