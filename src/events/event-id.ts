import { createHash } from 'node:crypto';
import { stringifyExactJson } from './exact-json.js';

/** Fields that describe the id or the tenant, not the event: left out of the derived id. */
const NOT_CANONICAL = new Set(['EventID', 'APIKeyID']);
/** Numeric ids: their digits, however spelt. */
const ID_FIELDS = new Set(['MessageID', 'mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id']);
/** Text to the log (its leading zeros are its own): only a number (which the schema refuses) is written as its digits, as before. */
const TEXT_ID_FIELDS = new Set(['mj_message_id']);

/**
 * The EventID of an event that came without one: a hash of its canonical form (keys sorted,
 * tenant included), so publishing the same event twice is a duplicate whatever its key order,
 * its ids' spelling (numbers or strings of digits, with spaces or leading zeros) or the spaces
 * around its address. Other fields are hashed as sent: an `mj_*_id` of 0 and the field left
 * out mean the same to the read models, but not here, since a producer sending the same event
 * again sends the same fields, and treating them alike would change the id of every event
 * already stored with such a field (a re-import would then store it again).
 */
export function deriveEventId(apiKeyId: string, raw: Record<string, unknown>): string {
  const entries: [string, unknown][] = [['@tenant', apiKeyId]];
  for (const key of Object.keys(raw).sort()) {
    if (NOT_CANONICAL.has(key)) continue;
    const value = raw[key];
    if (ID_FIELDS.has(key)) {
      entries.push([key, decimalId(value) ?? sortKeys(value)]);
    } else if (TEXT_ID_FIELDS.has(key) && (typeof value === 'number' || typeof value === 'bigint')) {
      entries.push([key, String(value)]);
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
    return /^\d{1,20}$/.test(t) ? t.replace(/^0+(?=\d)/, '') : null;
  }
  return null;
}
