import { isInteger, isSafeNumber, parse as losslessParse, stringify as losslessStringify } from 'lossless-json';
import { hasEscapedTopLevelKey, isTopLevelKeyAt } from './json-text.js';

/**
 * JSON with 64-bit integers kept exact: integers beyond 2^53 come back as `bigint`.
 *
 * Native JSON.parse does the work. When it rounded some integer (a real Mailjet MessageID
 * usually is one), a top-level field's exact digits are read back from the text — the key
 * appears once, unescaped, as `"Key": digits`; anything less clear-cut (nested big integers,
 * a key seen twice) is parsed again, slowly, by lossless-json.
 */
export function parseExactJson(text: string): unknown {
  return exactJsonValue(JSON.parse(text), text);
}

/**
 * `JSON.parse(text)`'s result made exact, as `parseExactJson` does: for a caller that already
 * holds it (the value is changed in place when it can be).
 */
export function exactJsonValue(value: unknown, text: string): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.some(hasUnsafeNumber) ? parseLossless(text) : value;

  const obj = value as Record<string, unknown>;
  const rounded: string[] = [];
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    if (typeof v === 'number') {
      if (Number.isInteger(v) && !Number.isSafeInteger(v)) rounded.push(key);
    } else if (v !== null && typeof v === 'object' && hasUnsafeNumber(v)) {
      return parseLossless(text);
    }
  }
  if (rounded.length === 0) return obj;
  // Each key read back is a few scans of the text: past a handful, one lossless parse costs less
  // (thousands of big integers in one event would otherwise take seconds, quadratic in its size).
  // A top-level key spelled with escaped characters is the parser's, not a text search's: the lossless parse decides.
  if (rounded.length > MAX_KEYS_READ_BACK || hasEscapedTopLevelKey(text)) return parseLossless(text);
  for (const key of rounded) {
    const exact = exactTopLevelInteger(text, key, obj[key] as number);
    if (exact === null) return parseLossless(text);
    obj[key] = exact;
  }
  return obj;
}

/** Top-level integers past 2^53 read back from the text one by one, at most (MessageID and the mj_*_id are 5). */
const MAX_KEYS_READ_BACK = 8;

/** JSON text for a value that may hold bigints (written as bare integers). */
export function stringifyExactJson(value: unknown): string {
  const text = losslessStringify(value);
  if (text === undefined) throw new TypeError('value cannot be written as JSON');
  return text;
}

function exactTopLevelInteger(text: string, key: string, rounded: number): bigint | null {
  const needle = `"${key}"`;
  const at = text.indexOf(needle);
  if (at < 0 || text.indexOf(needle, at + needle.length) >= 0) return null;
  if (!isTopLevelKeyAt(text, at)) return null;
  const digits = /^\s*:\s*(-?\d+)\s*[,}]/.exec(text.slice(at + needle.length, at + needle.length + 64))?.[1];
  return digits !== undefined && Number(digits) === rounded ? BigInt(digits) : null;
}

function parseLossless(text: string): unknown {
  return losslessParse(text, null, parseNumber);
}

/** Exact numbers stay numbers; only integers a double cannot hold become bigints. */
function parseNumber(value: string): number | bigint {
  return !isSafeNumber(value) && isInteger(value) ? BigInt(value) : Number(value);
}

function hasUnsafeNumber(value: unknown): boolean {
  if (typeof value === 'number') return Number.isInteger(value) && !Number.isSafeInteger(value);
  if (Array.isArray(value)) return value.some(hasUnsafeNumber);
  if (value !== null && typeof value === 'object') return Object.values(value).some(hasUnsafeNumber);
  return false;
}
