import { createReadStream, statSync } from 'node:fs';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { MAX_EVENT_BYTES } from '../events/decode.js';
import { isApiKeyId } from '../events/schema.js';
import { TenantDirectory } from '../ingest/tenants.js';
import { UsageError } from './usage-error.js';

export interface JsonLine {
  lineNo: number;
  text: string;
  /** The line's bytes as read (what a dead letter keeps). */
  bytes: Uint8Array;
  /** Why the line cannot be an event whatever it holds (its bytes are not UTF-8); else undefined. */
  problem?: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const lenient = new TextDecoder('utf-8');
const BOM = [0xef, 0xbb, 0xbf];

/**
 * The non-blank lines of a JSONL file, with the bytes read so far for progress reporting. Lines
 * are cut from the bytes and each decoded as strict UTF-8, as live ingest does: a line that is
 * not UTF-8 comes with a `problem` instead of having its bytes replaced by U+FFFD. A byte order
 * mark at the start of the file is skipped; `\r\n` line ends are taken as `\n`.
 *
 * A line longer than an event may be (MAX_EVENT_BYTES, its `\r` and a byte order mark aside)
 * comes with a `problem` and only its first MAX_EVENT_BYTES (what its dead letter keeps): however
 * long it is, it is never held whole (a 550 MiB line took minutes, 2.3 GB, then a crash that
 * stored nothing of the file).
 */
export function openJsonLines(path: string): { size: number; bytesRead: () => number; lines: AsyncIterable<JsonLine> } {
  const size = statSync(path).size;
  const stream = createReadStream(path, { highWaterMark: 1024 * 1024 });
  let bytes = 0;
  async function* lines(): AsyncGenerator<JsonLine> {
    let lineNo = 0;
    // The current line: its first bytes in parts (an event's most, and room for a byte order mark
    // and a `\r` around it), its whole length and its last byte.
    const keep = MAX_EVENT_BYTES + BOM.length + 1;
    let parts: Buffer[] = [];
    let kept = 0;
    let length = 0;
    let last = -1;
    // `copy`: a chunk's tail, kept past the chunk (so the chunk's other lines are not kept alive by it).
    const take = (piece: Buffer, copy = false): void => {
      if (piece.length === 0) return;
      length += piece.length;
      last = piece[piece.length - 1] as number;
      if (kept < keep) {
        const part = piece.subarray(0, keep - kept);
        parts.push(copy ? Buffer.from(part) : part);
        kept += part.length;
      }
    };
    const line = (): JsonLine | null => {
      lineNo++;
      const raw = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, kept);
      const cr = last === 0x0d ? 1 : 0;
      const bom = lineNo === 1 && BOM.every((byte, i) => raw[i] === byte) ? BOM.length : 0;
      const whole = length - cr - bom;
      parts = [];
      kept = 0;
      length = 0;
      last = -1;
      if (whole > MAX_EVENT_BYTES) {
        return { lineNo, text: '', bytes: raw.subarray(bom, bom + MAX_EVENT_BYTES), problem: `event is ${whole} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take` };
      }
      const b = raw.subarray(bom, raw.length - cr);
      try {
        const text = utf8.decode(b);
        return text.trim() === '' ? null : { lineNo, text, bytes: b };
      } catch {
        return { lineNo, text: lenient.decode(b), bytes: b, problem: 'line is not valid UTF-8' };
      }
    };
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      let start = 0;
      for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
        take(chunk.subarray(start, nl));
        const l = line();
        if (l !== null) yield l;
        start = nl + 1;
      }
      take(chunk.subarray(start), true);
    }
    if (length > 0) {
      const l = line();
      if (l !== null) yield l;
    }
  }
  return { size, bytesRead: () => bytes, lines: lines() };
}

export type LineTenant = { ok: true; id: string } | { ok: false; reason: string };

/**
 * The tenant of a line: the --api-key-id flag, else the event's own APIKeyID, which must be a
 * positive 64-bit integer (a larger one is the line's reject, never a tenant).
 */
export function lineTenant(value: unknown, flag: string | undefined): LineTenant {
  if (flag !== undefined) return { ok: true, id: flag };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, reason: 'event must be a JSON object' };
  const id = (value as Record<string, unknown>)['APIKeyID'];
  if (id === undefined) return { ok: false, reason: 'no APIKeyID: pass --api-key-id or put APIKeyID in each event' };
  // Spelled as the log's ids may be (events/schema.ts): a string of digits, spaces and leading zeros aside.
  const digits = typeof id === 'string' ? id.trim() : typeof id === 'bigint' || (typeof id === 'number' && Number.isSafeInteger(id)) ? String(id) : '';
  const text = /^\d{1,20}$/.test(digits) ? BigInt(digits).toString() : null;
  return text !== null && isApiKeyId(text) ? { ok: true, id: text } : { ok: false, reason: 'APIKeyID: must be a positive 64-bit integer' };
}

/**
 * The number of the file's first line when it is a JSON object without an APIKeyID (a file
 * whose events carry none, given without --api-key-id: each line would be rejected), else null.
 * Only the first line is read.
 */
export async function firstLineWithoutTenant(path: string): Promise<number | null> {
  for await (const line of openJsonLines(path).lines) {
    if (line.problem !== undefined) return null;
    let value: unknown;
    try {
      value = JSON.parse(line.text);
    } catch {
      return null;
    }
    return value !== null && typeof value === 'object' && !Array.isArray(value) && !Object.hasOwn(value, 'APIKeyID') ? line.lineNo : null;
  }
  return null;
}

/** An `--api-key-id` naming no key is a usage error (exit 2): every event of its lines would be dead-lettered. */
export async function refuseUnknownApiKeyId(db: Kysely<Database>, apiKeyId: string, consequence = ''): Promise<void> {
  const tenants = new TenantDirectory(db);
  await tenants.ensureLoaded([apiKeyId]);
  if (!tenants.knows(apiKeyId)) throw new UsageError(`--api-key-id ${apiKeyId}: no API key has this APIKeyID (\`keys list\` shows them, \`keys create\` makes one)${consequence}`);
}
