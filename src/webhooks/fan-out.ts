import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import type { Db } from '../db/connect.js';
import { nextTurn } from '../db/next-turn.js';
import type { Database } from '../db/schema.js';
import { describeError, isTransientDbError } from '../db/errors.js';
import { advanceCheckpoint, ensureCheckpoints, readCheckpoint } from '../log/checkpoints.js';
import { releaseLease, tryAcquireLease } from '../log/leases.js';
import { EVENTS_CHANNEL, Wakeup } from '../log/wakeup.js';
import type { Logger } from '../logger.js';
import { type EnqueueResult, type GroupingLimits, type LogEventForWebhooks, type OpenBatch, enqueueEvents, readLogAfter } from './enqueue.js';
import { CheckpointMoved, FAN_OUT_LEASE, WEBHOOKS_CHECKPOINT } from './fan-out-checkpoint.js';
import { recoverFirstAttempts } from './fan-out-recovery.js';
import { FirstAttemptLedger, ensureFirstAttemptsCheckpoint, raiseFirstAttemptsCheckpoint } from './first-attempts-ledger.js';
import { OUTBOX_CHANNEL, directPositions } from './outbox.js';
import { type FirstAttempts, Reservations } from './reservations.js';

/**
 * Reads the log from the `webhooks` checkpoint and turns events into deliveries, committed
 * with the checkpoint's move: outbox rows, or Version 1 first attempts this process sends
 * straight from the log, which the low-water checkpoint `webhooks:first-attempts` keeps
 * durable (first-attempts-ledger.ts). Every event is enqueued exactly once, whatever crashes:
 * a new holder first re-sends the direct first attempts left without an outcome. One process
 * at a time does this (a lease, like a projection's); any number deliver.
 */

export interface FanOutOptions {
  readonly batchSize: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly grouping: GroupingLimits;
}

/** The fan-out reads at least this many events (or its batch size, if smaller) however full the first lane is. */
const MIN_READ = 100;

export interface FanOutStats {
  held: boolean;
  position: string;
  batches: number;
  eventsRead: number;
  eventsEnqueued: number;
  deliveriesEnqueued: number;
  /** Direct first attempts found without an outcome after a crash or a takeover, and sent again. */
  recovered: number;
  /** Times the fan-out waited for the first lane's queues to go down before reading on. */
  paced: number;
  errors: number;
}

export class FanOut {
  readonly owner = `webhooks-${randomUUID()}`;
  readonly stats: FanOutStats = { held: false, position: '0', batches: 0, eventsRead: 0, eventsEnqueued: 0, deliveriesEnqueued: 0, recovered: 0, paced: 0, errors: 0 };
  /** Direct first attempts this process has committed and whose outcomes are not yet recorded. */
  readonly ledger = new FirstAttemptLedger();
  /** The low-water checkpoint as this holder last wrote it. */
  #lowWritten: bigint | null = null;
  readonly #wakeup: Wakeup;
  #open = new Map<string, OpenBatch>();
  /** The checkpoint as this holder last moved it (null: read it from the database). */
  #position: bigint | null = null;
  /** The next batch, read while the previous one was being written, and the size it was read with. */
  #prefetch: { after: bigint; limit: number; rows: Promise<LogEventForWebhooks[]> } | null = null;
  /** No more reading of the log (halt()). */
  #halted = false;
  /** No more lease renewals either (release()). */
  #stopped = false;
  #loop: Promise<void> | null = null;
  #leaseTimer: NodeJS.Timeout | null = null;
  #renewing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly options: FanOutOptions,
    private readonly log: Logger,
    /** Called after a commit that enqueued deliveries for others to claim, with the delay until the earliest is due. */
    private readonly onEnqueued: (dueInMs: number) => void,
    private readonly firstAttempts: FirstAttempts | null = null,
  ) {
    this.#wakeup = new Wakeup(db, EVENTS_CHANNEL, log);
  }

  /**
   * Direct first attempts whose outcomes are now recorded. When none is left open, the fan-out
   * wakes to raise the low-water checkpoint to its own (it is otherwise raised with each batch).
   */
  directDone(positions: readonly bigint[]): void {
    this.ledger.done(positions);
    if (this.ledger.size === 0) this.#wakeup.signal();
  }

  async start(): Promise<void> {
    await ensureCheckpoints(this.db.kysely, [WEBHOOKS_CHECKPOINT]);
    await ensureFirstAttemptsCheckpoint(this.db.kysely, WEBHOOKS_CHECKPOINT);
    await this.#wakeup.start();
    await this.#renewLease();
    this.#leaseTimer = setInterval(() => {
      this.#renewing = this.#renewing.then(() => this.#renewLease());
    }, Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.#loop = this.#run();
  }

  /**
   * Stops reading the log. The lease stays held (and renewed) until `release()`: while this
   * process's first attempts are still in flight, another dispatcher taking the lease would find
   * them without an outcome and send them again.
   */
  async halt(): Promise<void> {
    this.#halted = true;
    this.#wakeup.signal();
    await this.#loop;
    await this.#prefetch?.rows.catch(() => {});
    this.#prefetch = null;
  }

  /**
   * Halts, then lets the lease go: once the outcomes of this process's first attempts are written.
   * The low-water checkpoint is raised first, as far as they allow, so that the next holder has
   * no first attempts of this one to look for again.
   */
  async release(): Promise<void> {
    await this.halt();
    this.#stopped = true;
    if (this.#leaseTimer !== null) clearInterval(this.#leaseTimer);
    await this.#renewing;
    if (this.stats.held && this.#position !== null) await this.#raiseLowWater(this.#position).catch(() => {});
    await this.#wakeup.stop();
    if (this.stats.held) await releaseLease(this.db.kysely, FAN_OUT_LEASE, this.owner).catch(() => {});
    this.stats.held = false;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#halted) {
      try {
        // One turn per batch: on the embedded database a backlog would keep the thread (next-turn.ts).
        await nextTurn();
        const worked = await this.step();
        failures = 0;
        if (!worked) await this.#wakeup.wait(this.options.pollMs);
        else if ((await this.firstAttempts?.room(this.options.pollMs)) === true) this.stats.paced += 1;
      } catch (err) {
        failures += 1;
        this.stats.errors += 1;
        // The open batches and positions may not be what the database holds any more.
        this.#open.clear();
        this.#position = null;
        this.#prefetch = null;
        const transient = err instanceof CheckpointMoved || isTransientDbError(err);
        this.log[transient ? 'warn' : 'error']({ err: describeError(err) }, 'webhook fan-out failed; retrying');
        await sleep(Math.min(30_000, (transient ? 200 : 2000) * 2 ** Math.min(failures - 1, 6)));
      }
    }
  }

  /**
   * One batch of the log into the outbox. False when there was nothing to read (or no lease).
   * The next batch is read while this one is written (the log below the head never changes).
   */
  async step(): Promise<boolean> {
    if (!this.stats.held) return false;
    let position = this.#position;
    if (position === null) {
      position = await readCheckpoint(this.db.kysely, WEBHOOKS_CHECKPOINT);
      const recovered = await recoverFirstAttempts(this.db, this.options, this.ledger, this.firstAttempts, this.onEnqueued, this.log, position);
      this.stats.recovered += recovered;
    }
    const prefetched = this.#prefetch?.after === position ? this.#prefetch : null;
    this.#prefetch = null;
    const limit = prefetched?.limit ?? this.#readSize(0);
    const rows = await (prefetched?.rows ?? readLogAfter(this.db.kysely, position, limit));
    const last = rows.at(-1);
    if (last === undefined) {
      this.#position = position;
      await this.#raiseLowWater(position);
      return false;
    }
    const lastPosition = BigInt(last.position);
    if (rows.length >= limit) {
      // Sized for what the first lane can take once this batch's deliveries are in it (rows
      // with a payload: their tenant has a URL for their type).
      const nextLimit = this.#readSize(rows.reduce((n, r) => (r.payload !== null ? n + 1 : n), 0));
      const next = readLogAfter(this.db.kysely, lastPosition, nextLimit);
      next.catch(() => {});
      this.#prefetch = { after: lastPosition, limit: nextLimit, rows: next };
    }
    const reservations = this.firstAttempts !== null ? new Reservations(this.firstAttempts) : null;
    // Wake the claimers only for rows nobody here is about to claim. Rows waiting for a URL at
    // its cap in this process are claimed when one of its requests finishes (other dispatcher
    // processes find them at their next poll).
    const othersToClaim = (r: EnqueueResult) => r.deliveries > r.claimed.length + (reservations?.waiting ?? 0);
    let result: EnqueueResult;
    try {
      result = await this.db.kysely.transaction().execute(async (trx) => {
        const r = await enqueueEvents(trx, rows, this.options.grouping, this.#open, Date.now(), reservations);
        if (othersToClaim(r)) await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(trx);
        if (!(await advanceCheckpoint(trx, WEBHOOKS_CHECKPOINT, position, lastPosition))) throw new CheckpointMoved();
        await this.#writeLowWater(trx, this.ledger.lowWater(lastPosition, directPositions(r.claimed)));
        return r;
      });
    } catch (err) {
      reservations?.failed();
      this.#lowWritten = null;
      throw err;
    }
    this.ledger.add(directPositions(result.claimed));
    reservations?.committed(result.claimed);
    this.#open = result.openBatches;
    this.#position = lastPosition;
    this.stats.position = String(last.position);
    this.stats.batches += 1;
    this.stats.eventsRead += rows.length;
    this.stats.eventsEnqueued += result.events;
    this.stats.deliveriesEnqueued += result.deliveries;
    if (othersToClaim(result)) this.onEnqueued(0);
    if (result.openBatches.size > 0) this.onEnqueued(Math.max(0, Math.min(...[...result.openBatches.values()].map((b) => b.closesAt)) - Date.now()));
    return true;
  }

  /** When idle: raises the low-water checkpoint to what the ledger allows, as the holder. */
  async #raiseLowWater(position: bigint): Promise<void> {
    const low = this.ledger.lowWater(position);
    if (low === this.#lowWritten) return;
    await this.db.kysely.transaction().execute(async (trx) => {
      if (!(await advanceCheckpoint(trx, WEBHOOKS_CHECKPOINT, position, position))) throw new CheckpointMoved();
      await this.#writeLowWater(trx, low);
    });
  }

  /**
   * Raises the low-water checkpoint, in the caller's transaction, if this process still holds the
   * fan-out lease (the lease row locked till the commit). A holder that has lost it must not: the
   * next holder's recovered attempts are not in this ledger, and a mark raised past them would
   * leave them unsent should that holder crash too.
   */
  async #writeLowWater(trx: Kysely<Database>, low: bigint): Promise<void> {
    const { rows } = await sql`
      SELECT 1 FROM leases WHERE name = ${FAN_OUT_LEASE} AND owner = ${this.owner} AND expires_at > now() FOR SHARE`.execute(trx);
    if (rows.length === 0) throw new CheckpointMoved('the webhook fan-out lease is held by another dispatcher');
    await raiseFirstAttemptsCheckpoint(trx, low);
    this.#lowWritten = low;
  }

  /**
   * How many events to read next: the batch size, or no more than the first lane can start or
   * queue (less `pending`, deliveries read but not yet handed over), so that what is read goes out
   * from the log rather than into the outbox; at least MIN_READ, so the fan-out never stops.
   */
  #readSize(pending: number): number {
    const { batchSize } = this.options;
    if (this.firstAttempts === null) return batchSize;
    return Math.max(Math.min(MIN_READ, batchSize), Math.min(batchSize, this.firstAttempts.capacity() - pending));
  }

  async #renewLease(): Promise<void> {
    if (this.#stopped) return;
    try {
      const ok = await tryAcquireLease(this.db.kysely, FAN_OUT_LEASE, this.owner, this.options.leaseMs);
      if (ok && !this.stats.held) {
        this.log.info('webhook fan-out lease acquired');
        this.#open.clear();
        this.#position = null;
        this.#prefetch = null;
        this.#lowWritten = null;
        this.#wakeup.signal();
      } else if (!ok && this.stats.held) this.log.warn('webhook fan-out lease lost');
      this.stats.held = ok;
    } catch (err) {
      if (this.stats.held) this.log.warn({ err: describeError(err) }, 'webhook fan-out lease renewal failed');
      this.stats.held = false;
    }
  }
}
