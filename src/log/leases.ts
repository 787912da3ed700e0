import { CompiledQuery, type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Leases: "one active instance" for a named job. An owner holds a lease until it expires; it
 * renews well before that. A second process cannot take it while the first keeps renewing, and
 * takes it over once the first stops (crash included) and the lease runs out.
 */
export async function tryAcquireLease(db: Kysely<Database>, name: string, owner: string, ttlMs: number): Promise<boolean> {
  return (await tryAcquireLeases(db, [name], owner, ttlMs)).length === 0;
}

/**
 * `tryAcquireLease` of several (distinct) leases in one statement, in name order (two owners
 * asking for the same ones lock them in the same order): the names not had, held by another.
 * Its times are the clock's, not the transaction's start (`now()`): renewed at the end of a long
 * transaction (a replay's build step confirms its leases so), a lease must last `ttlMs` from
 * then, not from when the transaction began, which may already be past it.
 */
export async function tryAcquireLeases(db: Kysely<Database> | Queryable, names: readonly string[], owner: string, ttlMs: number): Promise<string[]> {
  if (names.length === 0) return [];
  const values = [[...names], owner, ttlMs / 1000];
  const rows = isKysely(db) ? (await db.executeQuery<{ name: string }>(CompiledQuery.raw(ACQUIRE_LEASES, values))).rows : (await db.query<{ name: string }>(ACQUIRE_LEASES, values)).rows;
  const had = new Set(rows.map((r) => r.name));
  return names.filter((n) => !had.has(n));
}

/** A pg client (a transaction's, say) as `tryAcquireLeases` may use it besides kysely. */
export interface Queryable {
  query<R extends object>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
}

const isKysely = (db: Kysely<Database> | Queryable): db is Kysely<Database> => 'executeQuery' in db;

const ACQUIRE_LEASES = `
    INSERT INTO leases (name, owner, expires_at, acquired_at)
    SELECT name, $2, clock_timestamp() + make_interval(secs => $3::float8), clock_timestamp() FROM unnest($1::text[]) AS name ORDER BY name
    ON CONFLICT (name) DO UPDATE
      SET owner = excluded.owner, expires_at = excluded.expires_at,
          acquired_at = CASE WHEN leases.owner = excluded.owner THEN leases.acquired_at ELSE excluded.acquired_at END
      WHERE leases.owner = excluded.owner OR leases.expires_at < clock_timestamp()
    RETURNING name`;

export async function releaseLease(db: Kysely<Database>, name: string, owner: string): Promise<void> {
  await db.deleteFrom('leases').where('name', '=', name).where('owner', '=', owner).execute();
}

export async function leaseHolder(db: Kysely<Database>, name: string): Promise<{ owner: string; expires_at: Date } | null> {
  const row = await db
    .selectFrom('leases')
    .select(['owner', 'expires_at'])
    .where('name', '=', name)
    .where('expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
  return row ?? null;
}

/** A lease held was found taken by another owner (this one stood still past its time). */
export class LeaseLost extends Error {
  constructor(readonly lease: string) {
    super(`the lease ${lease} was taken over by another process while this one stood still past its time`);
  }
}

/** How long a replay's leases last unrenewed: an interrupted or killed replay frees its read models within it. */
export const REPLAY_LEASE_MS = 60_000;

/**
 * Takes every lease in `names` for `owner` (none if one is held by another: returns the first
 * such name) and keeps them renewed every quarter of `ttlMs` until `release` is called. A
 * process that dies without releasing frees them once `ttlMs` has passed. Renewals run one at a
 * time, and `release` waits for the one in flight before deleting: a renewal landing after the
 * delete would take the lease again for a whole `ttlMs`.
 *
 * A process that stood still past `ttlMs` (stopped, a frozen machine) may find its leases taken
 * by another when it goes on: `lost` is aborted (with a {@link LeaseLost}) when a renewal finds
 * one taken, and `confirm` renews them all at once, on `db` or within a transaction (whose row
 * locks then keep them until it ends), and says whether every one is still its own.
 */
export async function holdLeases(
  db: Kysely<Database>,
  names: readonly string[],
  owner: string,
  ttlMs: number,
): Promise<{ ok: true; release: () => Promise<void>; confirm: (on?: Kysely<Database> | Queryable) => Promise<boolean>; lost: AbortSignal } | { ok: false; taken: string }> {
  const releaseAll = async (held: readonly string[]) => {
    if (held.length > 0) await db.deleteFrom('leases').where('name', 'in', held).where('owner', '=', owner).execute().catch(() => {});
  };
  const taken = await tryAcquireLeases(db, names, owner, ttlMs);
  if (taken.length > 0) {
    await releaseAll(names.filter((n) => !taken.includes(n)));
    return { ok: false, taken: taken[0] as string };
  }
  let released = false;
  let renewing: Promise<void> = Promise.resolve();
  const lost = new AbortController();
  const renew = async () => {
    if (released || lost.signal.aborted) return;
    // A renewal that fails (the database away a moment) says nothing of who holds the leases.
    const gone = await tryAcquireLeases(db, names, owner, ttlMs).catch(() => []);
    if (gone.length > 0 && !released) lost.abort(new LeaseLost(gone[0] as string));
  };
  const timer = setInterval(() => {
    renewing = renewing.then(renew);
  }, ttlMs / 4);
  timer.unref();
  return {
    ok: true,
    lost: lost.signal,
    confirm: async (on: Kysely<Database> | Queryable = db) => (await tryAcquireLeases(on, names, owner, ttlMs)).length === 0,
    release: async () => {
      released = true;
      clearInterval(timer);
      await renewing;
      await releaseAll(names);
    },
  };
}
