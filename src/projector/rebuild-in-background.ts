import { setTimeout as sleep } from 'node:timers/promises';
import type { Projection } from '../../projections/kit/types.js';
import type { Config } from '../config.js';
import { connectDb, type Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';
import { rebuildStale } from './rebuild-stale.js';

/** Pause after a failed try: the first, doubled after each failure up to the longest. */
export interface RebuildRetries {
  readonly firstMs: number;
  readonly maxMs: number;
}

const REBUILD_RETRIES: RebuildRetries = { firstMs: 30_000, maxMs: 300_000 };

/** The projector holding the projections back until their rebuild has swapped in (runner.ts). */
export interface HeldBack {
  takeUp(names: readonly string[]): void;
  rebuildFailed(err: unknown): void;
}

/** How long a stop lets the rebuild's statement in progress run on before ending its connections. */
export const REBUILD_STOP_GRACE_MS = 2_000;

/**
 * A projector's start with read models built by another version of their code: their rebuild
 * (`rebuildStale`, which also waits for another process's) runs while the service serves and
 * applies the others, and the projector takes them up once it has swapped in. Returns the stop.
 *
 * On Postgres the rebuild has connections of its own: its statements (minutes long on a big
 * log) take none of the pool the roles share, and a stop can end them. The abort is seen between
 * statements; one still running after `REBUILD_STOP_GRACE_MS` has its connection ended, so a
 * SIGTERM does not wait for it (what it leaves, the next run drops).
 */
export function startStaleRebuild(db: Db, stale: readonly Projection[], config: Pick<Config, 'database' | 'projector'>, projector: HeldBack, log: Logger): () => Promise<void> {
  const settings = config.projector;
  let own: Promise<Db> | null = null;
  const open = async (): Promise<Db> => (config.database.kind === 'postgres' ? connectDb({ ...config.database, poolSize: 3 }, { application: 'mailtally:rebuild' }) : db);
  // A failed connect is tried again with the next try.
  const connection = (): Promise<Db> =>
    (own ??= open().catch((err: unknown) => {
      own = null;
      throw err;
    }));
  const rebuild = async (signal: AbortSignal) =>
    rebuildStale(await connection(), stale, {
      readBatch: settings.replayBatchSize,
      counterEntries: settings.replayCounterRows,
      engine: settings.replayEngine,
      workMem: settings.replayWorkMem,
      catchUpBatch: settings.batchSize,
      onProgress: (p) => {
        if (p.phase === 'wait') log.info({ waitingFor: p.waitingFor, waitedSeconds: p.done, giveUpAfterSeconds: p.total }, 'rebuilt read models waiting for locks on the live tables to swap in');
      },
      signal,
    }, log);
  const stop = rebuildInBackground(stale.map((p) => p.name), rebuild, projector, log);
  return async () => {
    const ended = stop();
    // Unreferenced: once the rebuild has ended the pending grace keeps no process alive.
    const late = await Promise.race([ended.then(() => false), sleep(REBUILD_STOP_GRACE_MS, true, { ref: false })]);
    const opened = own === null ? null : await own.catch(() => null);
    const separate = opened !== null && opened !== db ? opened : null;
    if (late) await separate?.terminateConnections(2_000);
    await ended;
    await separate?.close();
  };
}

/**
 * Runs `rebuild` until it succeeds, then has the projector take `names` up. A failure (the
 * swap's locks not had within its 5 minutes, a lost connection) must not stop the service,
 * which keeps serving the old tables: it is logged, shown in /status, and tried again after a
 * pause. The returned stop aborts the try or pause in progress (`rebuild` gets the signal) and
 * resolves once it has ended: a shutdown waits for it before the database closes.
 */
export function rebuildInBackground(
  names: readonly string[],
  rebuild: (signal: AbortSignal) => Promise<void>,
  projector: HeldBack,
  log: Logger,
  retries: RebuildRetries = REBUILD_RETRIES,
): () => Promise<void> {
  const stopping = new AbortController();
  const ended = tryUntilRebuilt(names, rebuild, projector, log, retries, stopping.signal);
  return async () => {
    stopping.abort();
    await ended;
  };
}

async function tryUntilRebuilt(names: readonly string[], rebuild: (signal: AbortSignal) => Promise<void>, projector: HeldBack, log: Logger, retries: RebuildRetries, signal: AbortSignal): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    log.info({ projections: names, attempt }, 'read models built by another version of their code: rebuilding');
    try {
      await rebuild(signal);
      projector.takeUp(names);
      return;
    } catch (err) {
      if (signal.aborted) return;
      const pauseMs = Math.min(retries.maxMs, retries.firstMs * 2 ** (attempt - 1));
      log.error({ projections: names, attempt, err: describeError(err), retryInSeconds: pauseMs / 1000 }, 'rebuilding read models failed: their old tables keep serving; trying again');
      projector.rebuildFailed(err);
      const stopped = await sleep(pauseMs, false, { signal }).catch(() => true);
      if (stopped) return;
    }
  }
}
