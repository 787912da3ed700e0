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
 * Indexes for the filters of the API's campaign block on every table with the message dimensions
 * (the campaign itself is indexed with the table's time column, or leads a counter table's key):
 * each begins with the tenant and what the filter compares (api/conventions/campaign-filters.ts).
 */
export const DIM_FILTER_INDEXES: readonly (readonly string[])[] = [
  ['api_key_id', 'list_id'],
  ['api_key_id', 'sender_id'],
  ['api_key_id', 'lower(sender)'],
  ['api_key_id', 'sender_domain'],
  ['api_key_id', 'custom_campaign'],
];

/** The same, and the contact, for per-event / per-message tables. */
export const DIM_INDEXES: readonly (readonly string[])[] = [...DIM_FILTER_INDEXES, ['api_key_id', 'contact_id']];
