import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { describeError, isDataError } from '../db/errors.js';
import { nextTurn } from '../db/next-turn.js';
import type { AttemptOutcome, Database } from '../db/schema.js';
import type { Logger } from '../logger.js';
import { type DispatcherStats, observeLatency } from './dispatcher-stats.js';
import type { HttpOutcome } from './http-delivery.js';
import { type ClaimedDelivery, type FreshRow, type HeldRow, type ReleasedRow, type RetryRow, directPositions, freshRow, insertFreshRows, settleHeldRows } from './outbox.js';
import { nextRetry, retryWindowMs } from './retry-policy.js';
import { WrittenHealth, healthOf, killUrls, writeUrlHealth } from './url-health.js';
import { type AttemptRow, attemptRow, insertAttempts } from './attempt-rows.js';

/**
 * Records what came of each attempt, many at a time in one short transaction (never across an
 * HTTP call): the attempt rows; delivered rows removed; failed ones rescheduled on the retry
 * lane; a URL's last success and failure streak kept, and its death decided (url-health.ts:
 * failing for the retry schedule's whole window, or a delivery out of retries with no success
 * since it first failed). A dead URL's pending rows are rerouted; a delivery out of
 * retries whose URL worked since expires alone. Each row is written only by the holder of its
 * claim, so a worker whose lease ran out cannot undo another's work: its
 * attempt is still recorded (delivered or failed: the request was made), but it neither expires
 * the delivery nor kills the URL — the row's new holder decides that.
 *
 * A first attempt sent straight from the log (`direct`) has no outbox row: delivered, it leaves
 * only its attempt row; failed, it gets an outbox row on the retry lane (or, its URL dead, one
 * for the reroute); one that was never sent (handed off) gets an outbox row due now. Once that
 * commits, `onDirectDone` lets the fan-out's low-water mark move past it.
 */

export interface AttemptResult {
  delivery: ClaimedDelivery;
  http: HttpOutcome;
  attemptedAt: Date;
}

export interface OutcomeWriterOptions {
  readonly retryScheduleSeconds: readonly number[];
  /** Results per transaction at most. */
  readonly maxBatch: number;
  /** How long the first result of a batch may wait for company. */
  readonly lingerMs: number;
  /** URLs whose last written success and failure this writer remembers at most (see `WrittenHealth`). */
  readonly maxRememberedUrls?: number;
}


const ids = (rs: readonly AttemptResult[]): string[] => rs.map((r) => String(r.delivery.id));
const claimsOf = (rs: readonly AttemptResult[]): string[] => rs.map((r) => r.delivery.claim);

/** What a write leaves to reroute: URLs it found dead, and the failing URLs it found alive and scheduled retries for. */
export interface UrlsWritten {
  readonly dead: readonly bigint[];
  /**
   * A URL among these made dead by a PUT between the write's status read and its commit was
   * rerouted on that change without the rows the write held: the dispatcher reroutes it again
   * if it heard of a change to it since `since` (local clock, before the write began).
   */
  readonly retried: readonly bigint[];
  readonly since: number;
}

export class OutcomeWriter {
  #queue: AttemptResult[] = [];
  /** Direct first attempts that will not be sent by this process: they go to the outbox. */
  #handoffs: ClaimedDelivery[] = [];
  /** Per URL: the last success written, and whether a failure was written since. */
  readonly #written: WrittenHealth;
  #flushing: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  /** Cuts short the wait before a write is tried again, on stop. */
  readonly #stopping = new AbortController();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly options: OutcomeWriterOptions,
    private readonly stats: DispatcherStats,
    private readonly log: Logger,
    /** Called after a commit with the URLs it found dead and those it scheduled retries for (see `UrlsWritten`). */
    private readonly onUrls: (urls: UrlsWritten) => void,
    /** Called after a commit with the log positions of the direct first attempts it recorded. */
    private readonly onDirectDone: (positions: readonly bigint[]) => void = () => {},
  ) {
    // A URL's last success is written at most this often (it only decides deaths, windows long).
    this.#written = new WrittenHealth(Math.min(1000, retryWindowMs(options.retryScheduleSeconds) / 20), options.maxRememberedUrls);
  }

  /** URLs whose last written success or failure is remembered now. */
  get rememberedUrls(): number {
    return this.#written.size;
  }

  push(result: AttemptResult): void {
    if (this.#stopped) return;
    this.#queue.push(result);
    if (this.#queue.length >= this.options.maxBatch) this.#kick();
    else this.#timer ??= setTimeout(() => this.#kick(), this.options.lingerMs);
  }

  /** A direct first attempt this process will not send: written as an outbox row, due now. */
  handOff(row: ClaimedDelivery): void {
    if (this.#stopped) return;
    this.#handoffs.push(row);
    this.#timer ??= setTimeout(() => this.#kick(), this.options.lingerMs);
  }

  /** Writes everything queued (retrying until the database takes it, or the writer is stopped). */
  async drain(): Promise<void> {
    while (!this.#stopped && (this.#queue.length > 0 || this.#handoffs.length > 0 || this.#flushing !== null)) {
      this.#kick();
      await this.#flushing;
    }
  }

  /**
   * Writes nothing more: a write under way ends, none is tried again, what is queued is let go.
   * Those outcomes are not lost: an outbox row is claimable again when its claim's lease ends,
   * and a direct first attempt, never marked done, is sent again by the next fan-out holder's
   * recovery (first-attempts-ledger.ts).
   */
  stop(): void {
    this.#stopped = true;
    this.#stopping.abort();
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#queue = [];
    this.#handoffs = [];
  }

  #kick(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#stopped || this.#flushing !== null || (this.#queue.length === 0 && this.#handoffs.length === 0)) return;
    this.#flushing = this.#flushAll().finally(() => {
      this.#flushing = null;
      if (this.#queue.length > 0 || this.#handoffs.length > 0) this.#kick();
    });
  }

  /**
   * Writes the queue, a batch per transaction, retrying a batch the database could not take.
   * A batch it refused as data (a value out of range, a constraint) would fail the same way
   * forever and hold back every later outcome, all tenants': its results are written one at a
   * time instead, and one refused on its own is dropped with an error in the log. Its outbox
   * row stays claimed until its lease ends and is then sent again (at-least-once); a direct
   * first attempt's is let go, so the low-water mark can move on.
   */
  async #flushAll(): Promise<void> {
    let failures = 0;
    /** Results and hand-offs still to write one at a time, after a batch refused as data. */
    let alone = 0;
    while (!this.#stopped && (this.#queue.length > 0 || this.#handoffs.length > 0)) {
      // One turn per transaction: on the embedded database a backlog would keep the thread (next-turn.ts).
      await nextTurn();
      if (this.#stopped) return;
      const size = alone > 0 ? 1 : this.options.maxBatch;
      const batch = this.#queue.slice(0, size);
      const handoffs = alone > 0 && batch.length > 0 ? [] : this.#handoffs.slice(0, size);
      const items = batch.length + handoffs.length;
      try {
        const urls = await this.write(batch, handoffs);
        this.#taken(batch, handoffs);
        failures = 0;
        alone = Math.max(0, alone - items);
        if (urls.dead.length > 0 || urls.retried.length > 0) this.onUrls(urls);
      } catch (err) {
        if (isDataError(err)) {
          if (items > 1 && alone === 0) {
            this.log.warn({ err: describeError(err), results: batch.length, handoffs: handoffs.length }, 'webhook outcomes refused by the database; writing them one at a time');
            alone = items;
            continue;
          }
          const d = batch[0]?.delivery ?? handoffs[0];
          this.log.error(
            { err: describeError(err), delivery: d?.webhookId, urlId: String(d?.urlId), outcome: batch[0]?.http.ok === true ? 'delivered' : 'failed' },
            'webhook outcome refused by the database; dropped (an outbox row is sent again after its lease)',
          );
          this.#taken(batch, handoffs);
          alone = Math.max(0, alone - items);
          continue;
        }
        failures += 1;
        if (this.#stopped) return;
        this.log.warn({ err: describeError(err), results: batch.length }, 'cannot record webhook attempts; retrying');
        await sleep(Math.min(10_000, 100 * 2 ** Math.min(failures, 7)), undefined, { signal: this.#stopping.signal }).catch(() => {});
      }
    }
  }

  /** Takes written (or dropped) results and hand-offs off the queues; their direct first attempts are done. */
  #taken(batch: readonly AttemptResult[], handoffs: readonly ClaimedDelivery[]): void {
    this.#queue.splice(0, batch.length);
    this.#handoffs.splice(0, handoffs.length);
    const done = directPositions([...batch.map((r) => r.delivery), ...handoffs]);
    if (done.length > 0) this.onDirectDone(done);
  }

  /** One transaction for `batch` (and direct first attempts handed off); returns the URLs it found dead, to reroute, and those to reroute again if a PUT changed them meanwhile (`UrlsWritten`). */
  async write(batch: readonly AttemptResult[], handoffs: readonly ClaimedDelivery[] = []): Promise<UrlsWritten> {
    const since = Date.now();
    const schedule = this.options.retryScheduleSeconds;
    const failedUrls = [...new Set(batch.filter((r) => !r.http.ok).map((r) => String(r.delivery.urlId)))];
    const counts = { delivered: 0, deliveredEvents: 0, failed: 0, expired: 0, died: 0 };
    const written = await this.db.transaction().execute(async (trx) => {
      // The rows whose claim this worker still holds: delivered ones deleted at once (their
      // attempt is recorded below, held or not), the others locked until the commit.
      const held = new Set<string>();
      const isHeld = (r: AttemptResult) => r.delivery.direct !== null || held.has(String(r.delivery.id));
      const delivered = batch.filter((r) => r.http.ok && r.delivery.direct === null);
      const failed = batch.filter((r) => !r.http.ok && r.delivery.direct === null);
      if (delivered.length > 0) {
        const gone = await sql<{ id: string }>`
          DELETE FROM webhook_deliveries AS w USING unnest(${ids(delivered)}::bigint[], ${claimsOf(delivered)}::text[]) AS x(id, claim)
          WHERE w.id = x.id AND w.claim = x.claim RETURNING w.id::text AS id`.execute(trx);
        for (const r of gone.rows) held.add(r.id);
      }
      if (failed.length > 0) {
        const locked = await sql<{ id: string }>`
          SELECT w.id::text AS id FROM webhook_deliveries AS w JOIN unnest(${ids(failed)}::bigint[], ${claimsOf(failed)}::text[]) AS x(id, claim)
            ON w.id = x.id AND w.claim = x.claim
          FOR UPDATE OF w`.execute(trx);
        for (const r of locked.rows) held.add(r.id);
      }
      // Per URL: its last success, and its first failure after that (only a claim holder's failure counts).
      const urlHealth = healthOf(batch, isHeld);
      const healthy = [...urlHealth]
        .flatMap(([id, h]) => (h.lastOk !== null ? [{ id, at: h.lastOk, failingSince: h.failingSince }] : []))
        .filter((h) => this.#written.worthWriting(h.id, h.at, h.failingSince))
        .map((h) => ({ id: h.id, at: h.at.toISOString(), failing_since: h.failingSince?.toISOString() ?? null }));
      const failing = [...urlHealth].flatMap(([id, h]) => (h.lastOk === null && h.failingSince !== null ? [{ id, at: h.failingSince.toISOString() }] : []));
      const killed = await killUrls(trx, batch, schedule, isHeld, failing);
      const status = new Map<string, string>();
      if (failedUrls.length > 0) {
        const rows = await trx.selectFrom('callback_urls').select(['id', 'status']).where('id', 'in', failedUrls.map(BigInt)).execute();
        for (const row of rows) status.set(String(row.id), row.status);
      }

      const attempts: AttemptRow[] = [];
      /** Outbox rows for direct first attempts: retries, rows for the reroute, hand-offs. */
      const fresh: FreshRow[] = handoffs.map((d) => freshRow(d, { retry: false, attempts: 0, delayMs: 0, failedAt: null }));
      /** Attempt rows of direct first attempts given an outbox row: its id is their delivery id. */
      const pointing: { attempt: AttemptRow; key: string }[] = [];
      const removed: HeldRow[] = [];
      const released: ReleasedRow[] = [];
      const retries: RetryRow[] = [];
      for (const r of batch) {
        const d = r.delivery;
        const attempt = d.attempts + 1;
        let outcome: AttemptOutcome = 'delivered';
        if (!isHeld(r)) {
          // Claimed by another worker since (this one's lease ran out): the attempt is only recorded.
          outcome = r.http.ok ? 'delivered' : 'failed';
          if (r.http.ok) {
            counts.delivered += 1;
            counts.deliveredEvents += d.eventCount;
          } else counts.failed += 1;
        } else if (r.http.ok) {
          // Deleted above.
          counts.delivered += 1;
          counts.deliveredEvents += d.eventCount;
        } else {
          outcome = 'failed';
          counts.failed += 1;
          const failedAt = d.firstFailedAt ?? r.attemptedAt;
          const decision = nextRetry(schedule, attempt, r.http.retryAfterMs);
          if (status.get(String(d.urlId)) !== 'alive') {
            // Its URL is dead (now or already): the reroute moves it to the backup or drops it.
            if (d.direct !== null) fresh.push(freshRow(d, { retry: false, attempts: attempt, delayMs: 0, failedAt }));
            else released.push({ id: String(d.id), claim: d.claim, attempts: attempt, failed_at: failedAt.toISOString() });
          } else if (decision.kind === 'retry') {
            if (d.direct !== null) fresh.push(freshRow(d, { retry: true, attempts: attempt, delayMs: decision.delayMs, notBeforeMs: decision.notBeforeMs, failedAt }));
            else retries.push({ id: String(d.id), claim: d.claim, attempts: attempt, delay_ms: decision.delayMs, not_before_ms: decision.notBeforeMs, failed_at: failedAt.toISOString() });
          } else {
            outcome = 'expired';
            counts.expired += 1;
            if (d.direct === null) removed.push({ id: String(d.id), claim: d.claim });
          }
        }
        const row = attemptRow(r, attempt, outcome);
        attempts.push(row);
        if (d.direct !== null && outcome === 'failed') pointing.push({ attempt: row, key: `${d.urlId}:${d.webhookId}` });
      }

      const freshIds = await insertFreshRows(trx, fresh);
      for (const p of pointing) p.attempt.delivery_id = freshIds.get(p.key) ?? '0';

      await insertAttempts(trx, attempts);
      await settleHeldRows(trx, { removed, retries, released });
      await writeUrlHealth(trx, healthy, failing);
      counts.died = killed.size;
      const dead = [...status].filter(([, s]) => s !== 'alive').map(([id]) => BigInt(id));
      const retried = failedUrls.filter((u) => status.get(u) === 'alive').map(BigInt);
      return { dead, healthy, failing, retried };
    });
    this.#written.wrote(written.healthy, written.failing);

    const s = this.stats;
    s.delivered += counts.delivered;
    s.deliveredEvents += counts.deliveredEvents;
    s.failedAttempts += counts.failed;
    s.expired += counts.expired;
    s.urlsDied += counts.died;
    for (const r of batch) observeLatency(s.latencyMs, r.http.latencyMs);
    return { dead: written.dead, retried: written.retried, since };
  }
}
