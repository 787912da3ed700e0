import type { LogEventRow } from '../events/decode.js';
import { COLUMN_LIST } from './columns.js';

/**
 * Rows in COPY's text format (tab-separated, \N for null, backslash escapes), encoded straight
 * into one buffer per batch: no batch-sized string to build and re-encode.
 */
export interface CopyBody {
  buf: Buffer;
  /** Bytes used. */
  length: number;
}

/** The column order copyLine writes: the append's (checked when this module loads). */
const LINE_COLUMNS = [
  'event_id', 'api_key_id', 'type', 'event_time', 'message_id', 'email', 'recipient_domain', 'esp', 'campaign_id', 'contact_id',
  'list_id', 'sender_id', 'sender', 'sender_domain', 'custom_campaign', 'url', 'ua_platform', 'ua_client', 'geo', 'hard_bounce',
  'blocked', 'error_related_to', 'error', 'state_id', 'nats_seq', 'payload',
] as const satisfies readonly (keyof LogEventRow)[];
if (LINE_COLUMNS.join(', ') !== COLUMN_LIST) throw new Error('copy-text.ts writes the columns in another order than columns.ts lists them');

const NEEDS_ESCAPE = /[\\\t\n\r]/;
/** Backslashes are common (JSON escapes in payloads); tabs and line breaks, rare. */
function text(v: string): string {
  if (!NEEDS_ESCAPE.test(v)) return v;
  let out = v.includes('\\') ? v.replaceAll('\\', '\\\\') : v;
  if (out.includes('\t')) out = out.replaceAll('\t', '\\t');
  if (out.includes('\n')) out = out.replaceAll('\n', '\\n');
  if (out.includes('\r')) out = out.replaceAll('\r', '\\r');
  return out;
}
const nullable = (v: string | null): string => (v === null ? '\\N' : text(v));
const flag = (v: boolean | null): string => (v === null ? '\\N' : v ? 't' : 'f');
const num = (v: number | null): string => (v === null ? '\\N' : String(v));
/** Decimal ids, event types, ESP names: made by decoding, never anything to escape. */
const plain = (v: string | null): string => (v === null ? '\\N' : v);

/** Every column but the payload, each followed by its tab. */
function copyLineHead(r: LogEventRow): string {
  return (
    `${text(r.event_id)}\t${plain(r.api_key_id)}\t${plain(r.type)}\t${r.event_time}\t${plain(r.message_id)}\t${nullable(r.email)}\t` +
    `${nullable(r.recipient_domain)}\t${plain(r.esp)}\t${plain(r.campaign_id)}\t${plain(r.contact_id)}\t${plain(r.list_id)}\t` +
    `${plain(r.sender_id)}\t${nullable(r.sender)}\t${nullable(r.sender_domain)}\t${nullable(r.custom_campaign)}\t${nullable(r.url)}\t` +
    `${nullable(r.ua_platform)}\t${nullable(r.ua_client)}\t${nullable(r.geo)}\t${flag(r.hard_bounce)}\t${flag(r.blocked)}\t` +
    `${nullable(r.error_related_to)}\t${nullable(r.error)}\t${num(r.state_id)}\t${num(r.nats_seq)}\t`
  );
}

/**
 * The payload, the bulk of each line, is copied from the message's own bytes when it has nothing
 * to escape (no re-encoding of the text); otherwise it is escaped and encoded like the other columns.
 */
export function encodeCopyRows(rows: readonly LogEventRow[]): CopyBody {
  let buf = Buffer.allocUnsafe(Math.max(64 * 1024, rows.length * 768));
  let length = 0;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as LogEventRow;
    const head = copyLineHead(r);
    const bytes = r.payloadUtf8 !== undefined && !NEEDS_ESCAPE.test(r.payload) ? r.payloadUtf8 : null;
    const payload = bytes === null ? text(r.payload) : '';
    // UTF-8 takes at most 3 bytes per UTF-16 code unit; one more for the line end.
    const most = (head.length + payload.length) * 3 + (bytes?.length ?? 0) + 1;
    if (length + most > buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(buf.length * 2, length + most));
      buf.copy(bigger, 0, 0, length);
      buf = bigger;
    }
    length += buf.write(head, length, 'utf8');
    if (bytes !== null) {
      buf.set(bytes, length);
      length += bytes.length;
    } else {
      length += buf.write(payload, length, 'utf8');
    }
    buf[length++] = 0x0a;
  }
  return { buf, length };
}
