import type { ColumnSpec, ColumnType } from './types.js';

export function col(name: string, type: ColumnType, nullable = false): ColumnSpec {
  return { name, type, nullable };
}

export const API_KEY = col('api_key_id', 'bigint');

/** The message dimensions the API's campaign filter block uses (see `campaignDims`). */
export const DIM_COLUMNS: readonly ColumnSpec[] = [
  col('campaign_id', 'bigint'),
  col('list_id', 'bigint'),
  col('sender_id', 'bigint'),
  col('sender', 'text'),
  col('sender_domain', 'text'),
  col('custom_campaign', 'text'),
];

export function bigints(...names: string[]): ColumnSpec[] {
  return names.map((n) => col(n, 'bigint'));
}

/**
 * Indexes for the filters of the API's campaign block on per-event / per-message tables (the
 * campaign itself is indexed with the table's time column).
 */
export const DIM_INDEXES: readonly (readonly string[])[] = [
  ['api_key_id', 'list_id'],
  ['api_key_id', 'sender_id'],
  ['api_key_id', 'custom_campaign'],
  ['api_key_id', 'contact_id'],
];
