import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { type LogEventRow, decodeEventText } from '../../src/events/decode.js';
import { eventKey } from '../../src/log/append.js';
import type { GeneratedEvent } from '../support/generate.js';

/** The columns the product's append writes, in its order. */
export const LOG_COLUMNS = [
  'event_id', 'api_key_id', 'type', 'event_time', 'message_id', 'email', 'recipient_domain', 'esp',
  'campaign_id', 'contact_id', 'list_id', 'sender_id', 'sender', 'sender_domain', 'custom_campaign', 'url',
  'ua_platform', 'ua_client', 'geo', 'hard_bounce', 'blocked', 'error_related_to', 'error', 'state_id', 'nats_seq', 'payload',
] as const satisfies readonly (keyof LogEventRow)[];

export interface CopyInput {
  /** COPY text-format bodies, `batchRows` distinct rows each. */
  batches: Buffer[];
  rows: number;
  /** Events that repeated an earlier (APIKeyID, EventID). */
  duplicates: number;
  /** Time spent in decodeEventText alone (single thread), ms. */
  decodeMs: number;
}

const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
const SPECIAL = /[\\\t\n\r]/g;

function field(v: string | number | boolean | null): string {
  if (v === null) return '\\N';
  if (typeof v === 'boolean') return v ? 't' : 'f';
  if (typeof v === 'number') return String(v);
  return v.replace(SPECIAL, (c) => ESCAPES[c] ?? c);
}

/**
 * Decodes every event exactly as ingest does (same function, same context) and keeps the first
 * of each (APIKeyID, EventID): the rows the log must end up with, ready for COPY.
 */
export function buildCopyInput(events: Iterable<GeneratedEvent>, seqs: Float64Array, batchRows = 10_000): CopyInput {
  const seen = new Set<string>();
  const batches: Buffer[] = [];
  let lines: string[] = [];
  let decodeMs = 0;
  let duplicates = 0;
  let i = 0;
  for (const e of events) {
    const t = performance.now();
    const decoded = decodeEventText(e.text, { apiKeyId: e.apiKeyId, subjectEvent: e.event, natsSeq: seqs[i++] ?? 0 });
    decodeMs += performance.now() - t;
    if (!decoded.ok) throw new Error(`generated event ${i - 1} does not decode: ${decoded.reason}\n${e.text}`);
    const key = eventKey(decoded.row.api_key_id, decoded.row.event_id);
    if (seen.has(key)) {
      duplicates++;
      continue;
    }
    seen.add(key);
    const row = decoded.row;
    lines.push(LOG_COLUMNS.map((c) => field(row[c])).join('\t'));
    if (lines.length >= batchRows) {
      batches.push(Buffer.from(`${lines.join('\n')}\n`));
      lines = [];
    }
  }
  if (lines.length > 0) batches.push(Buffer.from(`${lines.join('\n')}\n`));
  return { batches, rows: seen.size, duplicates, decodeMs };
}

/** A clone of the log table (indexes, defaults, identity; LIKE copies no triggers). */
export async function createCopyTable(client: pg.Client): Promise<void> {
  await client.query('CREATE TABLE events_copy (LIKE events INCLUDING ALL)');
  const idx = await client.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE tablename = 'events_copy'`);
  if (!idx.rows.some((r) => /UNIQUE INDEX .* \(api_key_id, event_id\)/.test(r.indexdef))) {
    throw new Error(`events_copy lacks the unique (api_key_id, event_id) index: ${idx.rows.map((r) => r.indexdef).join('; ')}`);
  }
}

/** One COPY per batch (each its own transaction), one connection; returns elapsed ms. */
export async function rawCopy(client: pg.Client, batches: readonly Buffer[]): Promise<number> {
  const sql = `COPY events_copy (${LOG_COLUMNS.join(', ')}) FROM STDIN`;
  const started = performance.now();
  for (const body of batches) await pipeline(Readable.from([body]), client.query(copyFrom(sql)));
  return performance.now() - started;
}

/**
 * Rows that differ between what ingest stored and what the baseline copied, matched on
 * (api_key_id, event_id), or present in only one: 0 means nothing lost, nothing doubled, and
 * every column the same (nats_seq aside: which copy of a duplicate wins may differ).
 */
export async function countMismatches(client: pg.Client): Promise<number> {
  const cols = LOG_COLUMNS.filter((c) => c !== 'event_id' && c !== 'api_key_id' && c !== 'nats_seq');
  const r = await client.query<{ n: number }>(`
    SELECT count(*)::int AS n FROM events e FULL JOIN events_copy c USING (api_key_id, event_id)
    WHERE e.position IS NULL OR c.position IS NULL
       OR (${cols.map((c) => `e.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map((c) => `c.${c}`).join(', ')})`);
  return r.rows[0]?.n ?? -1;
}
