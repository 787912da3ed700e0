import { apiErrors } from '../../http/errors.js';

const MAX_INT64 = 2n ** 63n - 1n;

/**
 * An id from an item path (`/resource/{ID}`) for an int8 column: digits → bigint; anything else
 * is a 400 naming the id. `null` when it is beyond int8, so no record can have it (→ 404).
 */
export function itemId(text: string, name: string): bigint | null {
  const t = text.trim();
  if (!/^\d{1,20}$/.test(t)) throw apiErrors.badRequest(`Invalid parameter ${name}: must be a non-negative whole number (got ${JSON.stringify(text)})`);
  const id = BigInt(t);
  return id <= MAX_INT64 ? id : null;
}
