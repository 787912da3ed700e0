import { randomBytes } from 'node:crypto';

/**
 * JSON for API bodies, fast: native JSON.stringify, with every bigint written as a bare integer
 * (64-bit ids must not pass through a double). A bigint first becomes a marked string holding a
 * per-process random nonce, which no stored text can forge, and the marks are then unquoted.
 */
const NONCE = randomBytes(6).toString('hex');
const MARK = new RegExp(`"\\^${NONCE}:(-?\\d+)"`, 'g');

function replacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `^${NONCE}:${value.toString()}` : value;
}

export function toJson(value: unknown): string {
  try {
    // Most answers hold no bigint (wireId gives numbers when a double is exact): the fast path.
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
  const text = JSON.stringify(value, replacer);
  return text.includes(NONCE) ? text.replace(MARK, '$1') : text;
}

/** A 64-bit id for the wire: a number when a double holds it exactly, else a bigint. */
export function wireId(value: bigint | string | number | null | undefined): number | bigint {
  if (value === null || value === undefined || value === '') return 0;
  const big = typeof value === 'bigint' ? value : BigInt(value);
  return big <= BigInt(Number.MAX_SAFE_INTEGER) && big >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
}

/** A counter or other small integer column (int8 comes back as bigint). */
export function wireInt(value: bigint | number | string | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return Number(value);
}
