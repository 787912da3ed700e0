import { createHash } from 'node:crypto';
import { compareText } from './text-order.js';

/** Larger of two decimal-string ids ('0' = none), compared as integers without a double. */
export function maxId(a: string, b: string): string {
  if (a.length !== b.length) return a.length > b.length ? a : b;
  return a >= b ? a : b;
}

/** Larger of two strings ('' = none), by code point (`compareText`). */
export function maxText(a: string, b: string): string {
  return compareText(a, b) >= 0 ? a : b;
}

const stableIds = new Map<string, string>();

/**
 * A positive 48-bit integer id derived from text (the first 6 bytes of its SHA-256, plus 1) (a URL, a user agent, a list recipient), as a
 * decimal string: the same input always gets the same id, in live processing and in a replay,
 * and it stays exact in clients that read JSON numbers as doubles.
 */
export function stableId(text: string): string {
  let id = stableIds.get(text);
  if (id === undefined) {
    const digest = createHash('sha256').update(text).digest();
    id = String(digest.readUIntBE(0, 6) + 1);
    if (stableIds.size > 100_000) stableIds.clear();
    stableIds.set(text, id);
  }
  return id;
}
