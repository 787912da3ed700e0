import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { allColumns } from './tables.js';
import { insertRows } from './write-delta.js';

/**
 * Loads rows into a (shadow) table as fast as the driver allows: COPY on Postgres, large
 * JSON-parameter inserts on PGlite. `onRows` reports progress.
 */
export async function bulkLoad(db: Db, spec: TableSpec, table: string, rows: Iterable<readonly Value[]>, onRows: (n: number) => void): Promise<void> {
  const chunk: (readonly Value[])[] = [];
  const CHUNK = db.pool !== null ? 20_000 : 5_000;
  if (db.pool === null) {
    for (const row of rows) {
      chunk.push(row);
      if (chunk.length >= CHUNK) {
        await insertRows(db.kysely, spec, chunk, table.slice(spec.name.length));
        onRows(chunk.length);
        chunk.length = 0;
      }
    }
    if (chunk.length > 0) await insertRows(db.kysely, spec, chunk, table.slice(spec.name.length));
    onRows(chunk.length);
    return;
  }
  const client = await db.pool.connect();
  try {
    const names = allColumns(spec).map((c) => c.name).join(', ');
    await pipeline(
      async function* () {
        let text = '';
        let n = 0;
        for (const row of rows) {
          text += copyLine(row);
          if (++n >= CHUNK) {
            yield text;
            onRows(n);
            text = '';
            n = 0;
          }
        }
        if (n > 0) {
          yield text;
          onRows(n);
        }
      },
      client.query(copyFrom(`COPY ${table} (${names}) FROM STDIN`)) as unknown as NodeJS.WritableStream,
    );
  } finally {
    (client as pg.PoolClient).release();
  }
}

function copyLine(row: readonly Value[]): string {
  let out = '';
  for (let i = 0; i < row.length; i++) {
    const v = row[i] ?? null;
    if (i > 0) out += '\t';
    if (v === null) out += '\\N';
    else if (typeof v === 'string') out += NEEDS_ESCAPE.test(v) ? v.replace(ESCAPES, escapeChar) : v;
    else if (typeof v === 'boolean') out += v ? 't' : 'f';
    else out += String(v);
  }
  return `${out}\n`;
}

const NEEDS_ESCAPE = /[\\\t\n\r]/;
const ESCAPES = /[\\\t\n\r]/g;
const escapeChar = (c: string): string => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r');
