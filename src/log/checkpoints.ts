import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';

/** Named positions in the log (one per projection, one for the dispatcher). */
export async function readCheckpoint(db: Kysely<Database>, name: string): Promise<bigint> {
  const row = await db.selectFrom('checkpoints').select('position').where('name', '=', name).executeTakeFirst();
  return row?.position ?? 0n;
}

/**
 * The named checkpoints that exist, by name: position, and when their read models were last
 * built (`projections.built_at` as text, null if not recorded), which a replay's swap sets
 * along with the position.
 */
export async function readCheckpointsAndBuilds(db: Kysely<Database>, names: readonly string[]): Promise<Map<string, { position: bigint; builtAt: string | null }>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .selectFrom('checkpoints')
    .leftJoin('projections', 'projections.name', 'checkpoints.name')
    .select(['checkpoints.name', 'checkpoints.position', sql<string | null>`projections.built_at::text`.as('built_at')])
    .where('checkpoints.name', 'in', names)
    .execute();
  return new Map(rows.map((r) => [r.name, { position: r.position, builtAt: r.built_at }]));
}

/**
 * Moves a checkpoint from `expected` to `next`, in the caller's transaction. Returns false when
 * someone else moved it first (a second runner): the caller must roll back its batch.
 */
export async function advanceCheckpoint(db: Kysely<Database>, name: string, expected: bigint, next: bigint): Promise<boolean> {
  const result = await sql`
    INSERT INTO checkpoints (name, position, updated_at) VALUES (${name}, ${next}, now())
    ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
    WHERE checkpoints.position = ${expected}`.execute(db);
  return (result.numAffectedRows ?? 0n) === 1n;
}

export async function listCheckpoints(db: Kysely<Database>): Promise<{ name: string; position: bigint; updated_at: Date }[]> {
  return db.selectFrom('checkpoints').select(['name', 'position', 'updated_at']).orderBy('name').execute();
}

/** Creates missing checkpoints at 0 (so that a compare-and-set finds rows to compare against). */
export async function ensureCheckpoints(db: Kysely<Database>, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  await db
    .insertInto('checkpoints')
    .values(names.map((name) => ({ name, position: 0n })))
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
}

/**
 * Creates the projections' missing checkpoints at 0, and records with each that has no version
 * yet the version of the code its read models were built by, as `projections` holds it (see
 * migration 0006): a runner of other code then finds its first write refused.
 */
export async function ensureProjectionCheckpoints(db: Kysely<Database>, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  await ensureCheckpoints(db, names);
  await db
    .updateTable('checkpoints')
    .from('projections')
    .set((eb) => ({ version: eb.ref('projections.version') }))
    .whereRef('projections.name', '=', 'checkpoints.name')
    .where('checkpoints.version', 'is', null)
    .where('checkpoints.name', 'in', names)
    .execute();
}

/** The version recorded with each of the named checkpoints that has one, by name. */
export async function readCheckpointVersions(db: Kysely<Database>, names: readonly string[]): Promise<Map<string, number>> {
  if (names.length === 0) return new Map();
  const rows = await db.selectFrom('checkpoints').select(['name', 'version']).where('name', 'in', names).where('version', 'is not', null).execute();
  return new Map(rows.map((r) => [r.name, r.version as number]));
}
