import { sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { decodeEventValue, type LogEventRow } from '../../src/events/decode.js';
import { appendEvents } from '../../src/log/append.js';
import { logHead } from '../../src/log/read.js';
import { Projector } from '../../src/projector/runner.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
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

export const FAST_PROJECTOR = { batchSize: 500, pollMs: 50, leaseMs: 2000 } as const;

export async function startProjector(db: Db, options: Partial<typeof FAST_PROJECTOR> = {}, projections: readonly Projection[] = PROJECTIONS): Promise<Projector> {
  await ensureProjectionTables(db.kysely, PROJECTIONS);
  const p = new Projector(db, projections, { ...FAST_PROJECTOR, ...options }, quietLogger());
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
