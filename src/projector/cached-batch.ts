import type { LogEvent } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { type Batch, type Cursor, groupOf } from './batch.js';
import { Delta } from './contribution.js';
import type { CachedGroup, GroupCache } from './group-cache.js';
import { GroupDiff } from './group-diff.js';
import { collect, readEventsAfter, readGroupHistory } from './read-batch.js';
import { byTimeThenId, type GroupKey, groupKeyOf, groupKeyString } from './read-groups.js';

/** A batch computed with the group cache, and the cache entries to put in once it is committed. */
export interface CachedBatch extends Batch {
  readonly entries: ReadonlyMap<string, CachedGroup>;
}

/**
 * The live projector's step when every projection is at the same checkpoint: the same deltas as
 * `computeBatch`, with less reading. It reads only the batch's own events; groups the cache
 * holds take their earlier events from it, and only the others' earlier events are read from the
 * log (one statement). Then, as in `computeBatch`, each projection's difference between the
 * group's contribution before and after the batch.
 */
export async function computeCachedBatch(db: Db, cursors: readonly Cursor[], limit: number, cache: GroupCache): Promise<CachedBatch | null> {
  const position = cursors[0]?.position;
  if (position === undefined) return null;
  if (cursors.some((c) => c.position !== position)) throw new Error('computeCachedBatch needs every cursor at the same position');
  const fresh = await readEventsAfter(db, position, limit);
  const last = fresh.at(-1);
  if (last === undefined) return null;

  // The batch's events by group, and each group's key in order of first appearance.
  const added = new Map<string, LogEvent[]>();
  const keys: GroupKey[] = [];
  for (const e of fresh) if (collect(added, e)) keys.push(groupKeyOf(e));
  // Each group's earlier events: from the cache, taken before anything else is awaited (the
  // runner's lease timer clears the cache when a lease is won or lost, maybe while the history
  // below is being read), or else from the log.
  const cachedEvents = new Map<string, readonly LogEvent[]>();
  const misses: GroupKey[] = [];
  for (const key of keys) {
    const id = groupKeyString(key);
    const cached = cache.get(id);
    if (cached === undefined) misses.push(key);
    else cachedEvents.set(id, cached.events);
  }
  const history = misses.length > 0 ? await readGroupHistory(db, misses, position) : new Map<string, LogEvent[]>();

  const active = cursors.map((c) => ({ projection: c.projection, delta: new Delta(c.projection), diff: new GroupDiff(c.projection) }));
  const entries = new Map<string, CachedGroup>();
  for (const key of keys) {
    const id = groupKeyString(key);
    const events = added.get(id) ?? [];
    const earlier = cachedEvents.get(id) ?? history.get(id) ?? [];
    const all = [...earlier, ...events].sort(byTimeThenId);
    const after = groupOf(key, all);
    const before = earlier.length > 0 ? groupOf(key, earlier) : null;
    for (const c of active) {
      if (!c.projection.groups.includes(key.kind)) continue;
      if (before !== null) {
        c.diff.side = 0;
        c.projection.project(before, c.diff);
      }
      c.diff.side = 1;
      c.projection.project(after, c.diff);
      c.diff.flushInto(c.delta);
    }
    entries.set(id, { events: all });
  }
  return { to: last.position, events: fresh.length, deltas: new Map(active.map((c) => [c.projection.name, c.delta])), entries };
}
