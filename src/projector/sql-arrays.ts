import { type RawBuilder, sql } from 'kysely';
import type { ColumnSpec, Value } from '../../projections/kit/types.js';
import { SQL_RECORD_TYPES } from './sql-types.js';

/**
 * Rows sent to Postgres as one array per column, each a text parameter holding an array
 * literal (`{1,2,NULL}`, `{"a","b \"c\""}`) that the statement casts and unnests:
 * `unnest($1::text::bigint[], $2::text::text[], …) AS d(api_key_id, email, …)`.
 * Both drivers pass text parameters through untouched, Postgres parses each element with its
 * type's own input function, and no JSON is built or taken apart on either side.
 */

/** The array literal of one column's values. */
export function arrayLiteral(type: ColumnSpec['type'], values: readonly Value[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    out += arrayElement(type, values[i] ?? null);
  }
  return `${out}}`;
}

/** One element of an array literal. */
export function arrayElement(type: ColumnSpec['type'], v: Value): string {
  if (v === null) return 'NULL';
  switch (type) {
    case 'text': {
      const s = String(v);
      return `"${NEEDS_ESCAPE.test(s) ? s.replace(ESCAPES, '\\$&') : s}"`;
    }
    case 'boolean':
      return v === true || v === 't' || v === 'true' ? 't' : 'f';
    default:
      // Numbers and decimal-string ids: digits and a sign only.
      return typeof v === 'number' ? String(v) : checkedNumber(String(v));
  }
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPES = /["\\]/g;
const NUMBER = /^-?\d+$/;

function checkedNumber(s: string): string {
  if (!NUMBER.test(s)) throw new Error(`not an integer: ${JSON.stringify(s)}`);
  return s;
}

/** `unnest(…) AS <alias>(<columns>)` over `rows` (values in `columns` order), for a FROM clause. */
export function unnestRows(columns: readonly ColumnSpec[], rows: readonly (readonly Value[])[], alias = 'd'): RawBuilder<unknown> {
  const arrays = columns.map((c, i) => {
    const values = new Array<Value>(rows.length);
    for (let r = 0; r < rows.length; r++) values[r] = (rows[r] as readonly Value[])[i] ?? null;
    return sql`${arrayLiteral(c.type, values)}::text::${sql.raw(SQL_RECORD_TYPES[c.type])}[]`;
  });
  return sql`unnest(${sql.join(arrays)}) AS ${sql.raw(alias)}(${sql.raw(columns.map((c) => c.name).join(', '))})`;
}
