import { createHash } from 'node:crypto';
import { stringifyExactJson } from './exact-json.js';

/** Fields that describe the id or the tenant, not the event: left out of the derived id. */
const NOT_CANONICAL = new Set(['EventID', 'APIKeyID']);
const ID_FIELDS = new Set(['MessageID', 'mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id', 'mj_message_id']);

/**
 * The EventID of an event that came without one: a hash of its canonical form (keys sorted,
 * ids as decimal strings, tenant included), so publishing the same event twice is a duplicate
 * whatever the key order or number-vs-string spelling of its ids.
 */
export function deriveEventId(apiKeyId: string, raw: Record<string, unknown>): string {
  const entries: [string, unknown][] = [['@tenant', apiKeyId]];
  for (const key of Object.keys(raw).sort()) {
    if (NOT_CANONICAL.has(key)) continue;
    const value = raw[key];
    entries.push([key, ID_FIELDS.has(key) && (typeof value === 'number' || typeof value === 'bigint') ? String(value) : sortKeys(value)]);
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
