import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { cappedCount } from '../db/capped-count.js';
import type { Database, NewDeadLetter } from '../db/schema.js';
import { MAX_EVENT_BYTES } from '../events/decode.js';

/** Input that failed validation: kept with its reason, never lost, never blocking the stream. */
export async function writeDeadLetters(db: Kysely<Database>, letters: readonly NewDeadLetter[]): Promise<void> {
  for (const chunk of deadLetterChunks(letters)) await deadLetterInsert(db, chunk).execute();
}

/**
 * Letters per INSERT: each takes up to seven parameters, and a statement may bind at most 65,535
 * (a batch of 10,000 rejects or more failed whole, and NATS ingest retried it again and again).
 */
const DEAD_LETTERS_PER_INSERT = 1000;

/** The letters in slices of at most DEAD_LETTERS_PER_INSERT, one INSERT each. */
export function* deadLetterChunks(letters: readonly NewDeadLetter[]): Generator<readonly NewDeadLetter[]> {
  for (let i = 0; i < letters.length; i += DEAD_LETTERS_PER_INSERT) yield letters.slice(i, i + DEAD_LETTERS_PER_INSERT);
}

/**
 * The key of a dead letter with no message of its own to name it (import, HTTP): a hash of where
 * it came from, its tenant, its bytes and its reason, so the same reject sent again is stored once.
 */
export function contentKey(source: string, apiKeyId: string | null, raw: Uint8Array, reason: string): string {
  const hash = createHash('sha256');
  for (const part of [source, apiKeyId ?? '', reason]) hash.update(`${Buffer.byteLength(part)}:${part}\n`);
  return `${source}/${hash.update(raw).digest('base64url')}`;
}

/** The insert itself, for callers that run it on a raw connection (the COPY path compiles it). */
export function deadLetterInsert(db: Kysely<Database>, letters: readonly NewDeadLetter[]) {
  return (
    db
      .insertInto('dead_letters')
      .values(letters.map((l) => ({ ...l, ...keptRaw(l), subject: l.subject != null ? storableText(l.subject, 1000) : null })))
      // A redelivery of the same poison message, a reject sent or imported again, is stored once.
      .onConflict((oc) => oc.column('message_key').doNothing())
  );
}

export async function listDeadLetters(db: Kysely<Database>, opts: { limit: number; newestFirst?: boolean }) {
  return db
    .selectFrom('dead_letters')
    .select(['id', 'received_at', 'source', 'subject', 'api_key_id', 'nats_seq', 'reason', 'raw'])
    .orderBy('id', opts.newestFirst === true ? 'desc' : 'asc')
    .limit(opts.limit)
    .execute();
}

/** Up to this many dead letters are counted exactly; past it, /status gives Postgres's estimate. */
export const EXACT_DEAD_LETTER_COUNT = 10_000;

/** How many dead letters there are: exact up to EXACT_DEAD_LETTER_COUNT, past it Postgres's estimate (capped-count.ts). */
export function countDeadLetters(db: Kysely<Database>): Promise<{ count: number; exact: boolean }> {
  return cappedCount(db, 'dead_letters', EXACT_DEAD_LETTER_COUNT);
}

/** Text columns cannot hold U+0000 and reasons may quote the bad input: escape it, cap the length. */
function storableText(text: string, max: number): string {
  const clean = text.replaceAll('\u0000', '\\u0000');
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/** The input's first MAX_EVENT_BYTES at most (an oversized event is refused, not stored whole twice), and the reason, saying so. */
function keptRaw(l: NewDeadLetter): { raw: NewDeadLetter['raw']; reason: string } {
  const raw = l.raw;
  if (raw == null || raw.length <= MAX_EVENT_BYTES) return { raw, reason: storableText(l.reason, 2000) };
  return { raw: raw.subarray(0, MAX_EVENT_BYTES), reason: `${storableText(l.reason, 1900)} (raw: its first ${MAX_EVENT_BYTES} of ${raw.length} bytes)` };
}
