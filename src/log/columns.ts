import type { LogEventRow } from '../events/decode.js';

/**
 * The columns an append writes, with the SQL type each arrives as — one list for every write
 * path (the JSON parameter, COPY, the staging table), in the order of LogEventRow.
 */
export const LOG_COLUMNS = [
  ['event_id', 'text'],
  ['api_key_id', 'bigint'],
  ['type', 'text'],
  ['event_time', 'bigint'],
  ['message_id', 'numeric'],
  ['email', 'text'],
  ['recipient_domain', 'text'],
  ['esp', 'text'],
  ['campaign_id', 'bigint'],
  ['contact_id', 'bigint'],
  ['list_id', 'bigint'],
  ['sender_id', 'bigint'],
  ['sender', 'text'],
  ['sender_domain', 'text'],
  ['custom_campaign', 'text'],
  ['url', 'text'],
  ['ua_platform', 'text'],
  ['ua_client', 'text'],
  ['geo', 'text'],
  ['hard_bounce', 'boolean'],
  ['blocked', 'boolean'],
  ['error_related_to', 'text'],
  ['error', 'text'],
  ['state_id', 'smallint'],
  ['nats_seq', 'bigint'],
  ['payload', 'jsonb'],
] as const satisfies readonly (readonly [keyof LogEventRow, string])[];


/** `event_id, api_key_id, …` */
export const COLUMN_LIST = LOG_COLUMNS.map(([name]) => name).join(', ');
/** `event_id text, api_key_id bigint, …` — for a record definition or a table. */
export const COLUMN_DEFINITIONS = LOG_COLUMNS.map(([name, type]) => `${name} ${type}`).join(', ');
