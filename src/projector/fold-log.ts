import type pg from 'pg';
import type { LogEvent, Output, Projection, TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { copyEventsByMessage } from './copy-reader.js';
import { groupOf } from './batch.js';
import { Contribution } from './contribution.js';
import type { CounterSpill } from './counter-spill.js';
import { byTimeThenId, type GroupKey, groupKeyOf, groupKeyString, partitionFilter, readEventRange } from './read-groups.js';
import type { ReplayOptions, ReplayProgress } from './replay.js';
import type { ShadowRows } from './shadow-rows.js';
import { stopPoint } from './stop-point.js';

/** The replay's fold: the log read group by group (message or campaign) and folded by each projection. */

interface PendingGroup {
  readonly key: GroupKey;
  readonly events: LogEvent[];
}

/** Every event up to `head`, in position order, into its group (PGlite: keyset reads). */
async function readGroups(
  db: Db,
  head: bigint,
  options: Pick<ReplayOptions, 'readBatch' | 'signal'>,
  filter: string,
  onRead: (events: number) => void,
): Promise<Map<string, PendingGroup>> {
  const groups = new Map<string, PendingGroup>();
  let after = 0n;
  for (;;) {
    await stopPoint(options.signal);
    const events = await readEventRange(db.kysely, after, head, options.readBatch, filter);
    const last = events.at(-1);
    if (last === undefined) break;
    for (const e of events) addToGroup(groups, e);
    onRead(events.length);
    after = last.position;
  }
  return groups;
}

/**
 * Each projection's contribution of every group: counters merged into the totals, rows handed
 * to the outputs' rows. Lets the writes proceed every few hundred groups.
 */
async function foldGroups(outputs: readonly FoldOutput[], groups: Map<string, PendingGroup>, rows: ShadowRows | null): Promise<void> {
  let folded = 0;
  for (const [id, group] of groups) {
    foldGroup(outputs, group);
    groups.delete(id);
    if (rows !== null && ++folded % 500 === 0) await rows.room();
  }
}

/** Puts an event into its group (message or campaign), a new one if it is the group's first. */
function addToGroup(groups: Map<string, PendingGroup>, e: LogEvent): void {
  const key = groupKeyOf(e);
  const id = groupKeyString(key);
  const g = groups.get(id);
  if (g === undefined) groups.set(id, { key, events: [e] });
  else g.events.push(e);
}

/** One group, by every projection that reads its kind. */
function foldGroup(outputs: readonly FoldOutput[], { key, events }: PendingGroup): void {
  events.sort(byTimeThenId);
  const group = groupOf(key, events);
  for (const out of outputs) if (out.projection.groups.includes(key.kind)) out.projection.project(group, out);
}

/** A projection's output in a rebuild: counters add up in its total; rows go out as they come. */
class FoldOutput implements Output {
  readonly projection: Projection;
  private readonly specs: Map<string, TableSpec>;

  constructor(
    private readonly total: Contribution,
    private readonly rows: ShadowRows | null,
  ) {
    this.projection = total.projection;
    this.specs = new Map(total.projection.tables.filter((t) => t.kind === 'rows').map((t) => [t.name, t]));
  }

  add(table: string, keys: readonly Value[], sums: readonly number[], maxes?: readonly Value[], mins?: readonly Value[]): void {
    this.total.add(table, keys, sums, maxes, mins);
  }

  row(table: string, keys: readonly Value[], columns: readonly Value[]): void {
    const spec = this.specs.get(table);
    if (spec === undefined) throw new Error(`${this.projection.name}: no row table ${table}`);
    this.rows?.row(spec, keys, columns);
  }
}

/**
 * Reads and folds the whole log: on Postgres streamed in message order, each message folded as
 * the stream passes it; on PGlite one partition of groups at a time, so memory holds one
 * partition's events (plus, either way, the counter totals). Row-table rows go to `rows` as they
 * are folded; with none nothing is written (the benchmark's read+aggregate baseline).
 */
export async function foldLog(
  db: Db,
  projections: readonly Projection[],
  head: bigint,
  options: Pick<ReplayOptions, 'readBatch' | 'signal' | 'partitionEvents'>,
  rows: ShadowRows | null,
  progress: (p: ReplayProgress) => void = () => {},
  spill: CounterSpill | null = null,
): Promise<{ totals: Contribution[]; groups: number }> {
  const totals = projections.map((p) => new Contribution(p, true));
  const outputs = totals.map((c) => new FoldOutput(c, rows));
  if (db.pool !== null) return { totals, groups: await foldByMessage(db.pool, totals, outputs, head, options, rows, progress, spill) };
  const partitions = Math.max(1, Math.ceil(Number(head) / (options.partitionEvents ?? 400_000)));
  let read = 0;
  let groupCount = 0;
  for (let i = 0; i < partitions; i++) {
    const groups = await readGroups(db, head, options, partitionFilter(i, partitions), (n) => {
      read += n;
      progress({ phase: 'read', done: read, total: Number(head) });
    });
    groupCount += groups.size;
    await foldGroups(outputs, groups, rows);
  }
  return { totals, groups: groupCount };
}

/**
 * The fold on Postgres: the log streamed in message order (`copyEventsByMessage`), each message
 * folded as soon as the stream passes it, so memory holds one message's events and the totals
 * (which `spill`, if given, keeps to its limit). Campaign events (no message id; few) are gathered by campaign and folded at the end. Returns
 * the number of groups.
 */
async function foldByMessage(
  pool: pg.Pool,
  totals: readonly Contribution[],
  outputs: readonly FoldOutput[],
  head: bigint,
  options: Pick<ReplayOptions, 'signal'>,
  rows: ShadowRows | null,
  progress: (p: ReplayProgress) => void,
  spill: CounterSpill | null,
): Promise<number> {
  let groups = 0;
  // Synchronous for each message; only a spill, when the totals are full, waits for the database.
  const fold = (group: PendingGroup): boolean => {
    foldGroup(outputs, group);
    groups += 1;
    return spill?.full(totals) === true;
  };
  const campaigns = new Map<string, PendingGroup>();
  let current: PendingGroup | null = null;
  let read = 0;
  for await (const events of copyEventsByMessage(pool, head)) {
    options.signal?.throwIfAborted();
    for (const e of events) {
      if (e.type === 'campaign') {
        addToGroup(campaigns, e);
      } else if (current !== null && current.key.id === e.messageId && current.key.apiKeyId === e.apiKeyId) {
        current.events.push(e);
      } else {
        if (current !== null && fold(current)) await spill?.spill(totals);
        current = { key: groupKeyOf(e), events: [e] };
      }
    }
    read += events.length;
    progress({ phase: 'read', done: read, total: Number(head) });
    if (rows !== null) await rows.room();
  }
  if (current !== null && fold(current)) await spill?.spill(totals);
  for (const g of campaigns.values()) if (fold(g)) await spill?.spill(totals);
  return groups;
}
