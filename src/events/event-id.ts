import { createHash } from 'node:crypto';
import { stringifyExactJson } from './exact-json.js';

/** Fields that describe the id or the tenant, not the event: left out of the derived id. */
const NOT_CANONICAL = new Set(['EventID', 'APIKeyID']);
const ID_FIELDS = new Set(['MessageID', 'mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id', 'mj_message_id']);
/** Ids where 0 (or null) means none, as if the field were absent (CONTRACT §1). */
const NONE_WHEN_ZERO = new Set(['mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id']);

/**
 * The EventID of an event that came without one: a hash of its canonical form (keys sorted,
 * tenant included), so publishing the same event twice is a duplicate however it was spelt, as
 * long as it decodes to the same log row: any key order; ids as decimal digits whether sent as
 * numbers or strings, with spaces or leading zeros; `mj_*_id` 0 or null as absent; the
 * recipient address without surrounding spaces. Other fields are hashed as sent.
 */
export function deriveEventId(apiKeyId: string, raw: Record<string, unknown>): string {
  const entries: [string, unknown][] = [['@tenant', apiKeyId]];
  for (const key of Object.keys(raw).sort()) {
    if (NOT_CANONICAL.has(key)) continue;
    const value = raw[key];
    if (ID_FIELDS.has(key)) {
      const id = decimalId(value);
      if (NONE_WHEN_ZERO.has(key) && (id === '0' || value === null)) continue;
      entries.push([key, id ?? sortKeys(value)]);
    } else if (key === 'email' && typeof value === 'string') {
      entries.push([key, value.trim()]);
    } else {
      entries.push([key, sortKeys(value)]);
    }
  }
  // Built from entries, a key such as `__proto__` is a field like any other (an assignment would set the prototype and drop it).
  return `h:${createHash('sha256').update(stringifyExactJson(Object.fromEntries(entries))).digest('base64url').slice(0, 32)}`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return Object.fromEntries(Object.keys(obj).sort().map((k) => [k, sortKeys(obj[k])]));
  }
  return value;
}

/** An id's decimal digits without leading zeros, if it is a whole number or a string of digits (else null: hashed as sent). */
function decimalId(value: unknown): string | null {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') return Number.isSafeInteger(value) ? String(value) : null;
  if (typeof value === 'string') {
    const t = value.trim();
    return /^\d{1,20}$/.test(t) ? BigInt(t).toString() : null;
  }
  return null;
}
