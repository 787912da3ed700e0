import type { Db } from '../db/connect.js';
import { describeError, isTransientDbError } from '../db/errors.js';
import type { NewDeadLetter } from '../db/schema.js';
import type { LogEventRow } from '../events/decode.js';
import { appendEvents } from '../log/append.js';
import { copyAppend } from '../log/copy-append.js';
import { writeDeadLetters } from '../log/dead-letters.js';

export interface BatchOutcome {
  /** How many rows were new (each (tenant, EventID) counts once; the others were duplicates). */
  inserted: number;
  /** Rows the database refused for a reason retrying would not fix, by index in `rows`. */
  refused: Map<number, string>;
}

/**
 * Writes one ingest batch: the valid rows into the log and the rejects into dead letters, in one
 * transaction (COPY on Postgres, one JSON parameter on PGlite). Throws only on transient errors (the caller retries the whole batch later).
 * If the database refuses the batch for a data error, the batch is split so that only the
 * offending rows are dead-lettered, with the database's reason, and the rest is stored.
 */
export async function writeBatch(
  db: Db,
  rows: readonly LogEventRow[],
  deadLetters: readonly NewDeadLetter[],
  deadLetterFor: (index: number, reason: string) => NewDeadLetter,
): Promise<BatchOutcome> {
  try {
    const inserted =
      db.pool !== null
        ? await copyAppend({ ...db, pool: db.pool }, rows, deadLetters)
        : await db.kysely.transaction().execute(async (trx) => {
            const result = await appendEvents(trx, rows);
            await writeDeadLetters(trx, deadLetters);
            return result.inserted.size;
          });
    return { inserted, refused: new Map() };
  } catch (err) {
    if (isTransientDbError(err)) throw err;
  }

  let inserted = 0;
  const refused = new Map<number, string>();
  for (const [i, row] of rows.entries()) {
    try {
      const result = await appendEvents(db.kysely, [row]);
      inserted += result.inserted.size;
    } catch (err) {
      if (isTransientDbError(err)) throw err;
      refused.set(i, `refused by the database: ${describeError(err)}`);
    }
  }
  const letters = [...deadLetters, ...[...refused].map(([i, reason]) => deadLetterFor(i, reason))];
  await writeDeadLetters(db.kysely, letters);
  return { inserted, refused };
}

