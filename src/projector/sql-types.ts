import type { ColumnType } from '../../projections/kit/types.js';

export const SQL_RECORD_TYPES: Record<ColumnType, string> = {
  bigint: 'bigint',
  integer: 'integer',
  text: 'text',
  boolean: 'boolean',
  numeric: 'numeric(20,0)',
};
