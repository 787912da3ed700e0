import { apiErrors } from '../../http/errors.js';

const MAX_INT64 = 2n ** 63n - 1n;
export const MAX_UINT64 = 2n ** 64n - 1n;

/**
 * An id from an item path (`/resource/{ID}`): digits → bigint; anything else is a 400 naming the
 * id. `null` when it is beyond `max` (int8 by default; a message id's 64 unsigned bits), so no
 * record can have it (→ 404), however many digits it has.
 */
export function itemId(text: string, name: string, max: bigint = MAX_INT64): bigint | null {
  const t = text.trim();
  if (!/^\d+$/.test(t)) throw apiErrors.badRequest(`Invalid parameter ${name}: must be a non-negative whole number (got ${JSON.stringify(text)})`);
  if (t.replace(/^0+/, '').length > 20) return null;
  const id = BigInt(t);
  return id <= max ? id : null;
}
