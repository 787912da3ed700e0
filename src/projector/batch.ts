import type { Kysely } from 'kysely';
import type { Group, LogEvent, Projection } from '../../projections/kit/types.js';
import type { Database } from '../db/schema.js';
import { Contribution, Delta } from './contribution.js';
import { fetchGroups, type GroupKey, groupKeyString, readBatchGroups } from './read-groups.js';

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
export async function computeBatch(db: Kysely<Database>, cursors: readonly Cursor[], limit: number): Promise<Batch | null> {
  if (cursors.length === 0) return null;
  const from = cursors.reduce((min, c) => (c.position < min ? c.position : min), cursors[0]?.position ?? 0n);
  const read = await readBatchGroups(db, from, limit);
  if (read === null) return null;
  const groups = await fetchGroups(db, read.keys, read.last);
  const deltas = new Map<string, Delta>();
  const active = cursors.filter((c) => c.position < read.last);
  for (const c of active) deltas.set(c.projection.name, new Delta(c.projection));
  const positions = [...new Set(active.map((c) => c.position))];
  for (const key of read.keys) {
    const events = groups.get(groupKeyString(key)) ?? [];
    const after = groupOf(key, events);
    // The group as each cursor saw it (cursors usually agree: one filter for all).
    for (const position of positions) {
      const earlier = events.filter((e) => e.position <= position);
      const before = earlier.length === 0 ? null : earlier.length === events.length ? after : groupOf(key, earlier);
      if (before === after) continue;
      for (const c of active) {
        if (c.position !== position || !c.projection.groups.includes(key.kind)) continue;
        (deltas.get(c.projection.name) as Delta).apply(before === null ? null : contributionOf(c.projection, before), contributionOf(c.projection, after));
      }
    }
  }
  return { to: read.last, events: read.events, deltas };
}

const groupObjects = new WeakMap<readonly LogEvent[], Group>();

export function groupOf(key: GroupKey, events: readonly LogEvent[]): Group {
  let g = groupObjects.get(events);
  if (g === undefined) {
    g = { kind: key.kind, apiKeyId: key.apiKeyId, id: key.id, events };
    groupObjects.set(events, g);
  }
  return g;
}

export function contributionOf(projection: Projection, group: Group): Contribution {
  const c = new Contribution(projection);
  projection.project(group, c);
  return c;
}
