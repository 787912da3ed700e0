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
  const oldGroups = new Map<string, Group | null>();
  for (const cursor of cursors) {
    if (cursor.position >= read.last) continue;
    const delta = new Delta(cursor.projection);
    for (const key of read.keys) {
      if (!cursor.projection.groups.includes(key.kind)) continue;
      const events = groups.get(groupKeyString(key)) ?? [];
      const after = groupOf(key, events);
      const before = beforeGroup(oldGroups, key, events, cursor.position);
      delta.apply(before === null ? null : contributionOf(cursor.projection, before), contributionOf(cursor.projection, after));
    }
    deltas.set(cursor.projection.name, delta);
  }
  return { to: read.last, events: Number(read.last - from), deltas };
}

/** The group as it was at `position` (memoized per group and position: cursors usually agree). */
function beforeGroup(memo: Map<string, Group | null>, key: GroupKey, events: readonly LogEvent[], position: bigint): Group | null {
  const memoKey = `${groupKeyString(key)}@${position}`;
  let group = memo.get(memoKey);
  if (group === undefined) {
    const earlier = events.filter((e) => e.position <= position);
    group = earlier.length === 0 ? null : earlier.length === events.length ? groupOf(key, events) : groupOf(key, earlier);
    memo.set(memoKey, group);
  }
  return group;
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
