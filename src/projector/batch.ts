import type { Group, LogEvent, Projection } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { Delta } from './contribution.js';
import { GroupDiff } from './group-diff.js';
import { type BatchRead, readBatch } from './read-batch.js';
import { type GroupKey, groupKeyString } from './read-groups.js';

/** A projection and the log position its tables reflect. */
export interface Cursor {
  readonly projection: Projection;
  readonly position: bigint;
}

export interface Batch {
  /** The position every cursor moves to. */
  readonly to: bigint;
  /** Events read in the batch. */
  readonly events: number;
  readonly deltas: Map<string, Delta>;
}

/**
 * One step of incremental projection: the groups touched by the next `limit` events after the
 * slowest cursor, each group's whole event set fetched from the log, and for each projection the
 * difference between the group's contribution at its cursor and at the batch's end.
 */
export async function computeBatch(db: Db, cursors: readonly Cursor[], limit: number): Promise<Batch | null> {
  if (cursors.length === 0) return null;
  const from = cursors.reduce((min, c) => (c.position < min ? c.position : min), cursors[0]?.position ?? 0n);
  const read = await readBatch(db, from, limit);
  return read === null ? null : foldBatch(read, cursors);
}

/** Each projection's delta for a batch read: per group, the contribution at its cursor and at the batch's end. */
function foldBatch(read: BatchRead, cursors: readonly Cursor[]): Batch {
  const groups = read.groups;
  const deltas = new Map<string, Delta>();
  // One GroupDiff per projection, reused group after group.
  const active = cursors.filter((c) => c.position < read.last).map((c) => ({ ...c, delta: new Delta(c.projection), diff: new GroupDiff(c.projection) }));
  for (const c of active) deltas.set(c.projection.name, c.delta);
  const positions = [...new Set(active.map((c) => c.position))];
  for (const key of read.keys) {
    const events = groups.get(groupKeyString(key)) ?? [];
    const after = groupOf(key, events);
    // The group as each cursor saw it (cursors usually agree: one filter for all).
    for (const position of positions) {
      let earlierCount = 0;
      for (const e of events) if (e.position <= position) earlierCount += 1;
      if (earlierCount === events.length) continue;
      const before = earlierCount === 0 ? null : groupOf(key, events.filter((e) => e.position <= position));
      for (const c of active) {
        if (c.position !== position || !c.projection.groups.includes(key.kind)) continue;
        if (before !== null) {
          c.diff.side = 0;
          c.projection.project(before, c.diff);
        }
        c.diff.side = 1;
        c.projection.project(after, c.diff);
        c.diff.flushInto(c.delta);
      }
    }
  }
  return { to: read.last, events: read.events, deltas };
}

export function groupOf(key: GroupKey, events: readonly LogEvent[]): Group {
  return { kind: key.kind, apiKeyId: key.apiKeyId, id: key.id, events };
}
