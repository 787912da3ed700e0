import { sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import type { Group, LogEvent, Projection, TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { decodeEventValue, type LogEventRow } from '../../src/events/decode.js';
import { appendEvents } from '../../src/log/append.js';
import { logHead } from '../../src/log/read.js';
import { Contribution } from '../../src/projector/contribution.js';
import { replay } from '../../src/projector/replay.js';
import { Projector, type ProjectorOptions } from '../../src/projector/runner.js';
import { foldEmail } from '../../src/projector/read-groups.js';
import { allColumns, ensureProjectionTables } from '../../src/projector/tables.js';
import type { Logger } from '../../src/logger.js';
import { quietLogger, waitFor } from './harness.js';

/** Raw events (Mailjet shapes) → decoded, enriched log rows for tenant `apiKeyId`; throws on a bad one. */
export function logRows(apiKeyId: string, events: readonly Record<string, unknown>[]): LogEventRow[] {
  return events.map((e) => {
    const r = decodeEventValue(e, { apiKeyId });
    if (!r.ok) throw new Error(`bad test event ${JSON.stringify(e)}: ${r.reason}`);
    return r.row;
  });
}

export async function append(db: Db, apiKeyId: string, events: readonly Record<string, unknown>[]): Promise<void> {
  await appendEvents(db.kysely, logRows(apiKeyId, events));
}

export const FAST_PROJECTOR: ProjectorOptions = { batchSize: 500, pollMs: 50, leaseMs: 2000, cacheGroups: 50_000 };

export async function startProjector(db: Db, options: Partial<ProjectorOptions> = {}, projections: readonly Projection[] = PROJECTIONS, log: Logger = quietLogger()): Promise<Projector> {
  await ensureProjectionTables(db.kysely, PROJECTIONS);
  const p = new Projector(db, projections, { ...FAST_PROJECTOR, ...options }, log);
  await p.start();
  return p;
}

/** Waits until every projection's checkpoint has reached the log head. */
export async function caughtUp(db: Db, projections: readonly Projection[] = PROJECTIONS, timeoutMs = 30_000): Promise<void> {
  const head = await logHead(db.kysely);
  await waitFor(
    `projections at position ${head}`,
    async () => {
      const rows = await db.kysely.selectFrom('checkpoints').select(['name', 'position']).execute();
      const at = new Map(rows.map((r) => [r.name, r.position]));
      return projections.every((p) => (at.get(p.name) ?? 0n) >= head);
    },
    timeoutMs,
  );
}

/** A table's rows, ordered, as plain JSON-friendly objects (bigints and numerics as strings). */
export async function tableRows(db: Db, table: string): Promise<Record<string, unknown>[]> {
  const { rows } = await sql<Record<string, unknown>>`SELECT * FROM ${sql.raw(table)} ORDER BY 1, 2, 3`.execute(db.kysely);
  return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? String(v) : v])));
}

// ---------------------------------------------------------------------------------------------
// Given / when / then for read models: the same scenario runs as a pure fold (unit tests) and
// through the log and the projector (integration tests, Postgres and PGlite).

/** A log position named by the EventID of the event stored there (row tables use positions as ids). */
export interface PositionOf {
  readonly positionOf: string;
}
export const positionOf = (eventId: string): PositionOf => ({ positionOf: eventId });

export type Expected = Record<string, Value | PositionOf>;

export interface Then {
  readonly table: string;
  /** Only the tenant's rows matching these column values are compared. */
  readonly where?: Record<string, Value>;
  /**
   * Every row expected, complete: a column left out stands for its "none" value (0 for counts
   * and ids, '' for text, false, or null for nullable columns), not for "anything".
   */
  readonly rows: readonly Expected[];
}

export interface Step {
  /** Raw events appended in this step (each with an EventID, so positions can be named). */
  readonly append: readonly Record<string, unknown>[];
  readonly then: readonly Then[];
}

export interface Scenario {
  readonly name: string;
  /** The tenant the scenario's events belong to (scenarios share a database). */
  readonly tenant: string;
  readonly steps: readonly Step[];
}

/** The log row as a projection sees it (what the projector's SQL selects), for pure folds. */
export function toLogEvent(row: LogEventRow, position: bigint): LogEvent {
  const payload = JSON.parse(row.payload) as Record<string, unknown>;
  return {
    position,
    eventId: row.event_id,
    type: row.type,
    time: row.event_time,
    apiKeyId: row.api_key_id,
    messageId: row.message_id ?? '',
    campaignId: row.campaign_id,
    contactId: row.contact_id,
    listId: row.list_id,
    senderId: row.sender_id,
    email: foldEmail(row.email ?? ''),
    recipientDomain: row.recipient_domain ?? '',
    esp: row.esp ?? '',
    sender: row.sender ?? '',
    senderDomain: row.sender_domain ?? '',
    customCampaign: row.custom_campaign ?? '',
    url: row.url ?? '',
    uaPlatform: row.ua_platform ?? '',
    uaClient: row.ua_client ?? '',
    agent: row.type === 'open' || row.type === 'click' ? String(payload['agent'] ?? '') : '',
    geo: row.geo ?? '',
    hardBounce: row.hard_bounce ?? false,
    blocked: row.blocked ?? false,
    errorRelatedTo: row.error_related_to ?? '',
    error: row.error ?? '',
    stateId: row.state_id,
    campaignPayload: row.type === 'campaign' ? payload : null,
  };
}

/**
 * An in-memory log: events appended with increasing positions, a second copy of an EventID
 * ignored (as the real log does), folded on demand by every projection into table rows.
 */
export class MemoryLog {
  readonly events: LogEvent[] = [];
  readonly #seen = new Set<string>();

  append(apiKeyId: string, raw: readonly Record<string, unknown>[]): void {
    for (const row of logRows(apiKeyId, raw)) {
      const key = `${row.api_key_id}:${row.event_id}`;
      if (this.#seen.has(key)) continue;
      this.#seen.add(key);
      this.events.push(toLogEvent(row, BigInt(this.events.length + 1)));
    }
  }

  position(eventId: string): bigint {
    const e = this.events.find((x) => x.eventId === eventId);
    if (e === undefined) throw new Error(`no event ${eventId} in the log`);
    return e.position;
  }

  /** Every table's rows, as the projections' folds produce them (counter rows with all-zero sums dropped). */
  tables(projections: readonly Projection[] = PROJECTIONS): Map<string, Record<string, Value>[]> {
    const groups = new Map<string, { kind: Group['kind']; apiKeyId: string; id: string; events: LogEvent[] }>();
    for (const e of this.events) {
      const kind = e.type === 'campaign' ? 'campaign' : 'message';
      const id = kind === 'campaign' ? e.campaignId : e.messageId;
      const key = `${kind}:${e.apiKeyId}:${id}`;
      let g = groups.get(key);
      if (g === undefined) groups.set(key, (g = { kind, apiKeyId: e.apiKeyId, id, events: [] }));
      g.events.push(e);
    }
    const out = new Map<string, Record<string, Value>[]>();
    for (const p of projections) {
      const c = new Contribution(p);
      for (const g of groups.values()) {
        if (!p.groups.includes(g.kind)) continue;
        const events = [...g.events].sort((a, b) => a.time - b.time || (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0));
        p.project({ ...g, events }, c);
      }
      for (const spec of p.tables) {
        const names = allColumns(spec).map((col) => col.name);
        const rows: (readonly Value[])[] = [];
        if (spec.kind === 'counters') {
          const nMax = spec.maxes?.length ?? 0;
          const nMin = spec.mins?.length ?? 0;
          for (const e of c.counters.get(spec.name)?.values() ?? []) {
            if (e.sums.every((v) => v === 0)) continue;
            rows.push([...e.keys, ...e.sums, ...Array.from({ length: nMax }, (_, i) => e.maxes[i] ?? null), ...Array.from({ length: nMin }, (_, i) => e.mins[i] ?? null)]);
          }
        } else {
          for (const r of c.rows.get(spec.name)?.values() ?? []) rows.push([...r.keys, ...r.columns]);
        }
        out.set(spec.name, rows.map((r) => Object.fromEntries(names.map((n, i) => [n, r[i] ?? null]))));
      }
    }
    return out;
  }
}

/** Values compared as the API would read them: ids and counts as decimal strings. */
function normalized(v: unknown): Value {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return v;
  return String(v);
}

export function specOf(table: string): TableSpec {
  for (const p of PROJECTIONS) for (const t of p.tables) if (t.name === table) return t;
  throw new Error(`no read-model table ${table}`);
}

/** The "none" value of each column of a table (see `Then.rows`). */
function noneRow(spec: TableSpec): Record<string, Value> {
  const sums = new Set(spec.kind === 'counters' ? spec.sums.map((c) => c.name) : []);
  return Object.fromEntries(
    allColumns(spec).map((c) => [
      c.name,
      sums.has(c.name) ? '0' : c.nullable === true ? null : c.type === 'text' ? '' : c.type === 'boolean' ? false : '0',
    ]),
  );
}

const sortRows = (rows: Record<string, Value>[]) => rows.map((r) => JSON.stringify(r)).sort();

/** Actual (normalized, the tenant's, filtered) and expected rows of one `Then`, in one order, for toEqual. */
export function compareRows(
  tenant: string,
  then: Then,
  actual: readonly Record<string, unknown>[],
  position: (eventId: string) => bigint,
): { actual: string[]; expected: string[] } {
  const spec = specOf(then.table);
  const none = noneRow(spec);
  const columns = Object.keys(none);
  const shape = (r: Record<string, unknown>) => Object.fromEntries(columns.map((c) => [c, normalized(r[c])]));
  const where = Object.entries(then.where ?? {}).map(([k, v]) => [k, normalized(v)] as const);
  const mine = actual.map(shape).filter((r) => r['api_key_id'] === tenant && where.every(([k, v]) => r[k] === v));
  const expected = then.rows.map((e) => {
    for (const k of Object.keys(e)) if (!columns.includes(k)) throw new Error(`${then.table} has no column ${k}`);
    const resolved = Object.fromEntries(
      Object.entries(e).map(([k, v]) => [k, v !== null && typeof v === 'object' ? String(position(v.positionOf)) : normalized(v)]),
    );
    return shape({ ...none, api_key_id: tenant, ...where.reduce((o, [k, v]) => ({ ...o, [k]: v }), {}), ...resolved });
  });
  return { actual: sortRows(mine), expected: sortRows(expected) };
}

/** The tenant's rows of a read-model table, straight from the database. */
export async function tenantRows(db: Db, table: string, tenant: string): Promise<Record<string, unknown>[]> {
  const { rows } = await sql<Record<string, unknown>>`SELECT * FROM ${sql.raw(table)} WHERE api_key_id = ${tenant}`.execute(db.kysely);
  return rows;
}

/** Asserts that every read model equals a clean rebuild from the log (EXCEPT ALL both ways). */
export async function verifyAgainstReplay(db: Db): Promise<Record<string, { onlyLive: number; onlyRebuilt: number }>> {
  const report = await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000, mode: 'verify' });
  return report.differences ?? {};
}

export const NO_DIFFERENCES: Record<string, { onlyLive: number; onlyRebuilt: number }> = Object.fromEntries(
  PROJECTIONS.flatMap((p) => p.tables.map((t) => [t.name, { onlyLive: 0, onlyRebuilt: 0 }])),
);

/** Positions of a tenant's events by EventID. */
export async function positionsInLog(db: Db, tenant: string): Promise<(eventId: string) => bigint> {
  const rows = await db.kysely.selectFrom('events').select(['event_id', 'position']).where('api_key_id', '=', BigInt(tenant)).execute();
  const at = new Map(rows.map((r) => [r.event_id, BigInt(r.position)]));
  return (eventId) => {
    const p = at.get(eventId);
    if (p === undefined) throw new Error(`no event ${eventId} of tenant ${tenant} in the log`);
    return p;
  };
}
