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
