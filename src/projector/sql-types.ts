import type { ColumnType } from '../../projections/kit/types.js';

/** Postgres types of the spec's column types, as values are cast to them (`$1::text::bigint[]`). */
export const SQL_RECORD_TYPES: Record<ColumnType, string> = {
  bigint: 'bigint',
  integer: 'integer',
  text: 'text',
  boolean: 'boolean',
  numeric: 'numeric(20,0)',
};

/**
 * The same types as read-model tables declare their columns. Text columns compare by code point
 * (`COLLATE "C"`), as the fold compares text, whatever collation the database was created with:
 * `Sort` on a text property and the keys' order are the same on every server (on a database
 * created in `en_US.UTF-8`, the default of the official Docker image, `Zeta` would otherwise sort
 * after `apple`), and index comparisons are byte comparisons rather than the locale's.
 */
export const SQL_COLUMN_TYPES: Record<ColumnType, string> = { ...SQL_RECORD_TYPES, text: 'text COLLATE "C"' };
