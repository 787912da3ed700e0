import { sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import type { TableSpec } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { keyStatements, runTasks, type Task } from '../../src/projector/finish-shadows.js';
import { createIndexStatements, createTableStatements, execAll } from '../../src/projector/tables.js';

/**
 * The replay bench's write floor: what writing the read models costs when nothing is computed.
 * Every read-model table, as the replay just swapped it in, is copied into a bare table of the
 * same spec (`INSERT … SELECT *`), which then gets its primary key and indexes, largest table
 * first, two statements at a time: the way the set-based rebuild writes its shadows
 * (`src/projector/set-rebuild.ts`), without the SQL that computes their rows. No rebuild on the
 * same server can beat it: it writes the same rows and builds the same indexes.
 */

export const FLOOR_SUFFIX = '__floor';
const TABLES: readonly TableSpec[] = PROJECTIONS.flatMap((p) => p.tables);

/** `keep`: leave the copies in place (for a test to look at; `dropFloorTables` removes them). */
export async function writeFloor(db: Db, keep = false): Promise<{ ms: number; rows: number }> {
  await dropFloorTables(db);
  const { rows: sizes } = await sql<{ name: string; bytes: string }>`
    SELECT relname AS name, pg_relation_size(oid)::text AS bytes FROM pg_class
    WHERE relkind = 'r' AND relname IN (${sql.join(TABLES.map((s) => s.name))})`.execute(db.kysely);
  const bytes = new Map(sizes.map((r) => [r.name, Number(r.bytes)]));
  let rows = 0;
  const started = performance.now();
  try {
    const copy =
      (spec: TableSpec): Task =>
      async () => {
        await execAll(db.kysely, createTableStatements(spec, FLOOR_SUFFIX, false, false));
        const { numAffectedRows } = await sql.raw(`INSERT INTO ${spec.name}${FLOOR_SUFFIX} SELECT * FROM ${spec.name}`).execute(db.kysely);
        rows += Number(numAffectedRows ?? 0n);
        return [keyStatements(spec, FLOOR_SUFFIX), ...createIndexStatements(spec, FLOOR_SUFFIX).map((s) => [s])].map(
          (statements): Task =>
            async () => {
              await execAll(db.kysely, statements);
              return [];
            },
        );
      };
    const bySize = [...TABLES].sort((a, b) => (bytes.get(b.name) ?? 0) - (bytes.get(a.name) ?? 0));
    await runTasks(2, bySize.map(copy));
    return { ms: performance.now() - started, rows };
  } finally {
    if (!keep) await dropFloorTables(db);
  }
}

export async function dropFloorTables(db: Db): Promise<void> {
  for (const spec of TABLES) await sql.raw(`DROP TABLE IF EXISTS ${spec.name}${FLOOR_SUFFIX}`).execute(db.kysely);
}
