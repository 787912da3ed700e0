import { setTimeout as sleep } from 'node:timers/promises';
import type { Projection } from '../../projections/kit/types.js';
import type { Config } from '../config.js';
import type { Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';
import { rebuildStale } from './rebuild-stale.js';

/** Pause after a failed try: the first, doubled after each failure up to the longest. */
export interface RebuildRetries {
  readonly firstMs: number;
  readonly maxMs: number;
}

export const REBUILD_RETRIES: RebuildRetries = { firstMs: 30_000, maxMs: 300_000 };

/** The projector holding the projections back until their rebuild has swapped in (runner.ts). */
export interface HeldBack {
  takeUp(names: readonly string[]): void;
  rebuildFailed(err: unknown): void;
}

/**
 * A projector's start with read models built by another version of their code: their rebuild
 * (`rebuildStale`, which also waits for another process's) runs while the service serves and
 * applies the others, and the projector takes them up once it has swapped in. Returns the stop.
 */
export function startStaleRebuild(db: Db, stale: readonly Projection[], config: Config['projector'], projector: HeldBack, log: Logger): () => Promise<void> {
  const rebuild = (signal: AbortSignal) =>
    rebuildStale(db, stale, {
      readBatch: config.replayBatchSize,
      counterEntries: config.replayCounterRows,
      engine: config.replayEngine,
      workMem: config.replayWorkMem,
      catchUpBatch: config.batchSize,
      onProgress: (p) => {
        if (p.phase === 'wait') log.info({ waitingFor: p.waitingFor, waitedSeconds: p.done, giveUpAfterSeconds: p.total }, 'rebuilt read models waiting for locks on the live tables to swap in');
      },
      signal,
    }, log);
  return rebuildInBackground(stale.map((p) => p.name), rebuild, projector, log);
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
