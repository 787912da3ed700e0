import { setTimeout as sleep } from 'node:timers/promises';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import type { Logger } from '../logger.js';
import { replay, type ReplayOptions, ReplayRunning } from './replay.js';

/** How often a projector waiting for another process's rebuild looks whether it has swapped in. */
const REBUILD_RECHECK_MS = 2_000;

/**
 * Rebuilds the read models `stale` names (built by another version of their code), in the
 * background of a projector's start (rebuild-in-background.ts). Those another process is
 * rebuilding already (two projectors started together) are waited for instead: no failure to
 * log and retry after a pause, and taken up as soon as that process has swapped them in. Done
 * once the tables and checkpoints of every one record this code's version; one still of another
 * version once no rebuild of it runs (the other process stopped, or was of other code) is
 * rebuilt here. `options.signal` ends the wait.
 */
export async function rebuildStale(db: Db, stale: readonly Projection[], options: ReplayOptions, log: Logger, recheckMs = REBUILD_RECHECK_MS): Promise<void> {
  let waiting = false;
  for (let left = await builtByOtherCode(db, stale); left.length > 0; left = await builtByOtherCode(db, left)) {
    try {
      await replay(db, left, options);
      return;
    } catch (err) {
      if (!(err instanceof ReplayRunning)) throw err;
    }
    if (!waiting) log.info({ projections: left.map((p) => p.name) }, 'read models being rebuilt by another process: waiting for it to swap them in');
    waiting = true;
    const signal = options.signal;
    await sleep(recheckMs, undefined, signal !== undefined ? { signal } : {}).catch((err: unknown) => {
      signal?.throwIfAborted();
      throw err;
    });
  }
  if (waiting) log.info({ projections: stale.map((p) => p.name) }, 'read models rebuilt by another process: swapped in');
}

/** Those of `projections` whose tables or checkpoint do not record this code's version (a swap records both). */
async function builtByOtherCode(db: Db, projections: readonly Projection[]): Promise<Projection[]> {
  const rows = await db.kysely
    .selectFrom('projections')
    .innerJoin('checkpoints', 'checkpoints.name', 'projections.name')
    .select(['projections.name', 'projections.version as built', 'checkpoints.version as checkpoint'])
    .where('projections.name', 'in', projections.map((p) => p.name))
    .execute();
  const recorded = new Map(rows.map((r) => [r.name, r]));
  return projections.filter((p) => recorded.get(p.name)?.built !== p.version || recorded.get(p.name)?.checkpoint !== p.version);
}
