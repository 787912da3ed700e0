import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Version 1 first attempts that the fan-out sends straight from the log (no outbox row) are
 * durable through a second checkpoint, FIRST_ATTEMPTS_CHECKPOINT: a low-water mark below which
 * every such attempt has its outcome recorded (an attempt row, and an outbox row for a retry).
 * This ledger is the fan-out process's view of the attempts still open above it: positions are
 * added when the fan-out commits them and marked done when the outcome writer commits theirs.
 * After a crash the next fan-out holder re-examines the events between the two checkpoints and
 * sends again those with neither an attempt nor an outbox row (fan-out-recovery.ts), so at
 * most what was in flight is sent twice.
 */

export const FIRST_ATTEMPTS_CHECKPOINT = 'webhooks:first-attempts';

export class FirstAttemptLedger {
  readonly #open = new Set<bigint>();

  get size(): number {
    return this.#open.size;
  }

  has(position: bigint): boolean {
    return this.#open.has(position);
  }

  /** The positions open now, apart from what is added or done later. */
  snapshot(): ReadonlySet<bigint> {
    return new Set(this.#open);
  }

  add(positions: Iterable<bigint>): void {
    for (const p of positions) this.#open.add(p);
  }

  done(positions: Iterable<bigint>): void {
    for (const p of positions) this.#open.delete(p);
  }

  /**
   * The highest position below which nothing is open, counting `extra` positions as open too
   * (a batch about to commit); `high` when nothing is: the fan-out's checkpoint.
   */
  lowWater(high: bigint, extra: Iterable<bigint> = []): bigint {
    let low = high + 1n;
    for (const p of this.#open) if (p < low) low = p;
    for (const p of extra) if (p < low) low = p;
    return low - 1n;
  }
}

/**
 * Creates the low-water checkpoint where missing, at the fan-out's checkpoint: before it
 * existed, every first attempt went through the outbox, so everything up to there is recorded.
 */
export async function ensureFirstAttemptsCheckpoint(db: Kysely<Database>, fanOutCheckpoint: string): Promise<void> {
  await sql`
    INSERT INTO checkpoints (name, position, updated_at)
    SELECT ${FIRST_ATTEMPTS_CHECKPOINT}, coalesce((SELECT position FROM checkpoints WHERE name = ${fanOutCheckpoint}), 0), now()
    ON CONFLICT (name) DO NOTHING`.execute(db);
}

/** Raises the low-water checkpoint (never lowers it), in the caller's transaction. */
export async function raiseFirstAttemptsCheckpoint(db: Kysely<Database>, position: bigint): Promise<void> {
  await sql`
    UPDATE checkpoints SET position = ${position}, updated_at = now()
    WHERE name = ${FIRST_ATTEMPTS_CHECKPOINT} AND position < ${position}`.execute(db);
}
