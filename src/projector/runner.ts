import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { nextTurn } from '../db/next-turn.js';
import { describeError, isTransientDbError } from '../db/errors.js';
import { ensureProjectionCheckpoints, readCheckpointsAndBuilds, readCheckpointVersions } from '../log/checkpoints.js';
import { releaseLease, tryAcquireLease } from '../log/leases.js';
import type { Logger } from '../logger.js';
import { type Batch, computeBatch, type Cursor } from './batch.js';
import { BatchPace } from './batch-pace.js';
import { type CachedBatch, computeCachedBatch } from './cached-batch.js';
import { GroupCache } from './group-cache.js';
import { EVENTS_CHANNEL, Wakeup } from '../log/wakeup.js';
import { type CheckpointMoves, writeDeltas } from './write-delta.js';

export interface ProjectorOptions {
  /** Events per batch. */
  readonly batchSize: number;
  /** Longest wait for new events when no notification arrives. */
  readonly pollMs: number;
  /** Lease lifetime; renewed every third of it. A dead runner's projections pass over after it. */
  readonly leaseMs: number;
  /** Groups kept in memory between batches (see `group-cache.ts`); 0: none. */
  readonly cacheGroups?: number;
  /** Least time between the starts of two live batches (see `batch-pace.ts`); 0: none. */
  readonly minIntervalMs?: number;
  /**
   * Projections whose read models were built by another version of their code and are being
   * rebuilt for this one (rebuild-in-background.ts): their leases are not taken until `takeUp`
   * names them, since folding into those tables with this code would corrupt them.
   */
  readonly holdBack?: readonly string[];
}

export interface ProjectorStats {
  /** Projections this runner holds the lease of. */
  held: string[];
  /**
   * Projections whose read models were rebuilt by another version of their code (a rolling
   * upgrade's new process, or a rollback's old one): this runner no longer applies them.
   */
  superseded: string[];
  /**
   * Projections held back while their read models are rebuilt for this code, here or by another
   * process this one waits for (`holdBack`); the API serves their old tables meanwhile.
   */
  rebuilding: string[];
  /** Why the last try of that rebuild failed (it is tried again); null once one succeeds. */
  rebuildError: string | null;
  batches: number;
  events: number;
  errors: number;
  /** Groups of a batch found in the group cache, and not found. */
  cacheHits: number;
  cacheMisses: number;
}

class CheckpointMoved extends Error {
  constructor(name: string) {
    super(`checkpoint of ${name} was moved by another runner`);
  }
}

/**
 * Keeps read models up to date: for the projections whose lease it holds, reads a batch after
 * their checkpoints, folds it, and writes every delta and every checkpoint in one transaction
 * (one statement), batch after batch while there is more. Wakes on the log's NOTIFY, falls back
 * to polling; transient database errors back off and retry.
 */
export class Projector {
  readonly owner = `projector-${randomUUID()}`;
  readonly stats: ProjectorStats;
  readonly #held = new Set<string>();
  readonly #superseded = new Set<string>();
  readonly #heldBack: Set<string>;
  readonly #wakeup: Wakeup;
  #stopped = false;
  #loop: Promise<void> | null = null;
  #leaseTimer: NodeJS.Timeout | null = null;
  #renewing: Promise<void> = Promise.resolve();
  /** Checkpoints as this runner last read or moved them (the write's compare-and-set catches anyone else moving one). */
  readonly #positions = new Map<string, bigint>();
  /** When each projection's read models were built (`projections.built_at`), as read with its checkpoint: a replay's swap changes it. */
  readonly #builtAt = new Map<string, string | null>();
  readonly #cache: GroupCache;
  readonly #pace: BatchPace;

  constructor(
    private readonly db: Db,
    private readonly projections: readonly Projection[],
    private readonly options: ProjectorOptions,
    private readonly log: Logger,
  ) {
    this.#wakeup = new Wakeup(db, EVENTS_CHANNEL, log);
    this.#cache = new GroupCache(options.cacheGroups ?? 0);
    this.#pace = new BatchPace(options.minIntervalMs ?? 0);
    this.#heldBack = new Set(options.holdBack ?? []);
    this.stats = { held: [], superseded: [], rebuilding: [...this.#heldBack], rebuildError: null, batches: 0, events: 0, errors: 0, cacheHits: 0, cacheMisses: 0 };
  }

  async start(): Promise<void> {
    await ensureProjectionCheckpoints(this.db.kysely, this.projections.map((p) => p.name));
    await this.#wakeup.start();
    await this.#renewLeases();
    this.#leaseTimer = setInterval(() => this.#renewSoon(), Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.#loop = this.#run();
  }

  /**
   * The rebuild of these held-back projections has swapped in: they are applied from now on,
   * from the checkpoints it set. Their leases are sought at once, not at the next renewal.
   */
  takeUp(names: readonly string[]): void {
    for (const name of names) this.#heldBack.delete(name);
    this.stats.rebuilding = [...this.#heldBack];
    if (this.stats.rebuilding.length === 0) this.stats.rebuildError = null;
    this.log.info({ projections: names }, 'rebuilt read models taken up: applying them');
    this.#renewSoon();
  }

  /** A try of the held-back projections' rebuild failed (for /status; it is tried again). */
  rebuildFailed(err: unknown): void {
    this.stats.rebuildError = describeError(err);
  }

  /** Renewals run one at a time: one asked for during another follows it. */
  #renewSoon(): void {
    this.#renewing = this.#renewing.then(() => this.#renewLeases());
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wakeup.signal();
    this.#pace.interrupt();
    if (this.#leaseTimer !== null) clearInterval(this.#leaseTimer);
    await this.#loop;
    await this.#renewing;
    await this.#wakeup.stop();
    for (const name of this.#held) await releaseLease(this.db.kysely, leaseName(name), this.owner).catch(() => {});
    this.#held.clear();
  }

  async #run(): Promise<void> {
    let failures = 0;
    // The last wait ended by its timeout: no append was announced meanwhile.
    let quiet = false;
    while (!this.#stopped) {
      try {
        const worked = await this.#drain(quiet);
        failures = 0;
        quiet = worked ? false : !(await this.#wakeup.wait(this.options.pollMs));
      } catch (err) {
        // Re-read where the checkpoints are; the cached groups may be ahead of them.
        this.#forget();
        failures += 1;
        this.stats.errors += 1;
        if (err instanceof CheckpointMoved && (await this.#letGoOfSuperseded().catch(() => false))) {
          failures = 0;
          continue;
        }
        if (err instanceof CheckpointMoved && failures === 1) {
          // Someone else moved it (a rebuild's swap, a runner that held the lease before): start over from there.
          this.log.info({ err: describeError(err) }, 'projection checkpoint moved; continuing from it');
          continue;
        }
        const transient = err instanceof CheckpointMoved || isTransientDbError(err);
        const level = transient ? 'warn' : 'error';
        this.log[level]({ err: describeError(err) }, 'projection batch failed; retrying');
        await sleep(Math.min(30_000, (transient ? 200 : 2000) * 2 ** Math.min(failures - 1, 6)));
      }
    }
  }

  /**
   * Batches back to back until there is nothing left; false if there was nothing at all.
   *
   * With the group cache, a backlog is drained pipelined: while a full batch's write is in
   * Postgres, the next is read and folded here. The next batch needs only the log (committed
   * events) and the groups' states after the batch being written, which the cache takes as soon
   * as that batch is folded; the checkpoints here move then too. Writes stay in order, one at a
   * time: a batch is written only after the one before it committed, and its write expects the
   * checkpoints where that one left them. If a write fails, the batch folded meanwhile is dropped, and
   * `#run` forgets the positions and the cache, and starts again from the database.
   */
  async #drain(quiet: boolean): Promise<boolean> {
    let worked = false;
    let writing: Promise<void> | null = null;
    try {
      while (!this.#stopped) {
        // One turn per batch: on the embedded database a backlog would keep the thread (next-turn.ts).
        await nextTurn();
        const startedAt = await this.#pace.wait();
        if (this.#stopped) break;
        const held = this.projections.filter((p) => this.#held.has(p.name));
        if (held.length === 0) break;
        const cursors = await this.#cursors(held);
        const generation = this.#cache.generation;
        // The cache holds every held projection's state at one position: usable when they all are there.
        const cached = this.#cache.maxGroups > 0 && cursors.every((c) => c.position === cursors[0]?.position);
        if (!cached) this.#cache.clear();
        const batch: Batch | CachedBatch | null = cached
          ? await computeCachedBatch(this.db, cursors, this.options.batchSize, this.#cache)
          : await computeBatch(this.db, cursors, this.options.batchSize);
        // The batch before this one must have committed before this one is written (or dropped).
        const previous = writing;
        writing = null;
        await previous;
        if (batch === null) {
          // Nothing at all to do after a quiet poll: make sure the database still has the
          // checkpoints this runner last wrote (see #checkpointsWentBack); if not, fold again
          // from where it has them.
          if (!worked && quiet && (await this.#checkpointsWentBack(held))) continue;
          break;
        }
        this.#pace.started(startedAt, batch.events >= this.options.batchSize);
        const moves = cursors
          .filter((c) => batch.deltas.has(c.projection.name))
          .map((c) => ({ name: c.projection.name, expected: c.position, version: c.projection.version }));
        for (const m of moves) this.#positions.set(m.name, batch.to);
        if ('entries' in batch && this.#cache.generation === generation) this.#cache.putAll((batch as CachedBatch).entries);
        writing = this.#write(batch, moves);
        // Caught when awaited; until then, not an unhandled rejection.
        writing.catch(() => {});
        // Only a full batch says more is waiting. After a partial one, reading on at once would
        // mostly find nothing and only slow the write that makes this batch visible.
        if (!cached || batch.events < this.options.batchSize) {
          await writing;
          writing = null;
        }
        worked = true;
      }
    } finally {
      // A write still in Postgres lands (or fails) before the loop stops or goes to sleep.
      if (writing !== null) await writing;
    }
    return worked;
  }

  async #write(batch: Batch, moves: CheckpointMoves['moves']): Promise<void> {
    if (!(await writeDeltas(this.db, [...batch.deltas.values()], '', { moves, to: batch.to }))) throw new CheckpointMoved(moves.map((m) => m.name).join(', '));
    this.stats.cacheHits = this.#cache.hits;
    this.stats.cacheMisses = this.#cache.misses;
    this.stats.batches += 1;
    this.stats.events += batch.events;
  }

  /**
   * True if a checkpoint in the database is not where this runner last moved it, and then
   * positions and cache are forgotten. Live writes commit without waiting for the disk
   * (write-delta.ts), so a database crash can take back the last batches; with new events the
   * next write finds out (its checkpoints are not where it expects), but a quiet log brings no
   * write, so a wake-up by the poll's timeout with nothing to do checks: one small query per
   * `pollMs` while the log is quiet, none while appends keep coming. A replay's swap moves a
   * checkpoint too (back, when this runner had applied events its catch-up left), and records
   * a new build time with it: that is no crash.
   */
  async #checkpointsWentBack(held: readonly Projection[]): Promise<boolean> {
    const stored = await readCheckpointsAndBuilds(this.db.kysely, held.filter((p) => this.#positions.has(p.name)).map((p) => p.name));
    const moved = [...stored].filter(([name, s]) => s.position !== this.#positions.get(name));
    const rebuilt = moved.filter(([name, s]) => this.#builtAt.has(name) && s.builtAt !== this.#builtAt.get(name));
    const lost = moved.filter((m) => !rebuilt.includes(m));
    for (const [name, s] of stored) this.#builtAt.set(name, s.builtAt);
    if (moved.length === 0) return false;
    for (const [name, { position }] of rebuilt) {
      this.log.info({ projection: name, position: String(position) }, `read model ${name} was rebuilt by a replay; continuing from position ${position}`);
    }
    if (lost.length > 0) {
      this.log.warn({ projections: lost.map(([name]) => name), at: lost.map(([, s]) => String(s.position)) }, 'read model checkpoints are not where this runner left them (a database crash took back its last batches?); folding again from them');
    }
    this.#forget();
    return true;
  }

  /**
   * After a write found a checkpoint moved: true if some held projection's read models now
   * record another version of its code than this runner's (a rebuild by that version swapped
   * them in). This runner then lets go of those projections for good: folding with other code
   * than built the tables would corrupt them, and the process of that version applies them.
   */
  async #letGoOfSuperseded(): Promise<boolean> {
    const held = this.projections.filter((p) => this.#held.has(p.name));
    const recorded = await readCheckpointVersions(this.db.kysely, held.map((p) => p.name));
    const superseded = held.filter((p) => recorded.has(p.name) && recorded.get(p.name) !== p.version);
    for (const p of superseded) {
      this.#superseded.add(p.name);
      this.#held.delete(p.name);
      await releaseLease(this.db.kysely, leaseName(p.name), this.owner).catch(() => {});
      this.log.error(
        { projection: p.name, version: p.version, rebuiltBy: recorded.get(p.name) },
        'read models rebuilt by another version of their code: this process no longer applies them (upgrade or stop it)',
      );
    }
    this.stats.held = [...this.#held];
    this.stats.superseded = [...this.#superseded];
    return superseded.length > 0;
  }

  /** Positions and cached groups are read again from the database before the next batch. */
  #forget(): void {
    this.#positions.clear();
    this.#cache.clear();
  }

  /** Each held projection and its checkpoint: from the database when one is not known here yet. */
  async #cursors(held: readonly Projection[]): Promise<Cursor[]> {
    if (held.some((p) => !this.#positions.has(p.name))) {
      for (const [name, { position, builtAt }] of await readCheckpointsAndBuilds(this.db.kysely, held.map((p) => p.name))) {
        this.#positions.set(name, position);
        this.#builtAt.set(name, builtAt);
      }
    }
    return held.map((projection) => ({ projection, position: this.#positions.get(projection.name) ?? 0n }));
  }

  async #renewLeases(): Promise<void> {
    if (this.#stopped) return;
    // Renewals fail together (the database away): one line names them all.
    const failed: string[] = [];
    let failure: unknown = null;
    for (const p of this.projections) {
      if (this.#superseded.has(p.name) || this.#heldBack.has(p.name)) continue;
      try {
        const ok = await tryAcquireLease(this.db.kysely, leaseName(p.name), this.owner, this.options.leaseMs);
        // Let go of while this renewal was on its way (#letGoOfSuperseded): not taken back, ever.
        if (this.#superseded.has(p.name)) {
          if (ok) await releaseLease(this.db.kysely, leaseName(p.name), this.owner).catch(() => {});
          continue;
        }
        if (ok && !this.#held.has(p.name)) {
          this.#held.add(p.name);
          this.#positions.delete(p.name);
          this.#cache.clear();
          this.log.info({ projection: p.name }, 'projection lease acquired');
          this.#wakeup.signal();
        } else if (!ok && this.#held.delete(p.name)) {
          this.#cache.clear();
          this.log.warn({ projection: p.name }, 'projection lease lost');
        }
      } catch (err) {
        // Cannot tell whether we still hold it: stop applying until a renewal succeeds.
        if (this.#held.delete(p.name)) {
          this.#cache.clear();
          failed.push(p.name);
          failure = err;
        }
      }
    }
    if (failed.length > 0) this.log.warn({ projections: failed, err: describeError(failure) }, 'projection lease renewal failed: not applying them until a renewal succeeds');
    this.stats.held = [...this.#held];
  }
}

export function leaseName(projection: string): string {
  return `projection:${projection}`;
}
