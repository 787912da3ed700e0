import { isInteger, isSafeNumber, parse as losslessParse, stringify as losslessStringify } from 'lossless-json';

/**
 * JSON with 64-bit integers kept exact. Native JSON.parse is used when it is safe (no integer
 * beyond 2^53 anywhere in the document); otherwise the document is parsed again losslessly and
 * such integers come back as `bigint`.
 */
export function parseExactJson(text: string): unknown {
  const fast: unknown = JSON.parse(text);
  return hasUnsafeNumber(fast) ? losslessParse(text, null, parseNumber) : fast;
}

/** JSON text for a value that may hold bigints (written as bare integers). */
export function stringifyExactJson(value: unknown): string {
  const text = losslessStringify(value);
  if (text === undefined) throw new TypeError('value cannot be written as JSON');
  return text;
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
