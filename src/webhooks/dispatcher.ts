import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import { Wakeup } from '../log/wakeup.js';
import type { Logger } from '../logger.js';
import { type DispatcherStats, emptyStats } from './dispatcher-stats.js';
import { FanOut } from './fan-out.js';
import { HttpDelivery, type HttpOutcome } from './http-delivery.js';
import { Lane } from './lane.js';
import { type ClaimedDelivery, OUTBOX_CHANNEL, releaseClaims } from './outbox.js';
import { OutcomeWriter } from './outcome-writer.js';
import { isVersion2Batch, rerouteDeadUrl, splitForVersion1 } from './reroute.js';
import { signatureHeaders, signingKey } from './signing.js';
import { parseAllowList } from './ssrf-guard.js';
import { CALLBACK_URLS_CHANNEL, UrlChanges } from './url-changes.js';

/**
 * The webhook dispatcher: the fan-out (log → outbox, exactly once, one process at a time)
 * and two delivery lanes (first attempts, retries) claiming from the outbox in every process.
 * A claim is committed before its HTTP call and the outcome is written after it in a new short
 * transaction, so a crash loses nothing and repeats at most what was in flight. Version 1 first
 * attempts that fit the first lane's free slots or its queues are sent straight from the log,
 * without an outbox row, and kept durable by a low-water checkpoint (first-attempts-ledger.ts);
 * the rest are claimed from the outbox.
 */

export interface DispatcherOptions {
  readonly allowList: readonly string[];
  readonly retryScheduleSeconds: readonly number[];
  readonly timeoutMs: number;
  /** First attempts in flight at most, and per URL. */
  readonly concurrency: number;
  readonly urlConcurrency: number;
  /** A URL that throttles (429, 502, 503, 504) or times out is held below urlConcurrency a while (url-limits.ts). */
  readonly adaptiveConcurrency: boolean;
  /** Retries in flight at most (per URL: a quarter of urlConcurrency, at least 1). */
  readonly retryConcurrency: number;
  readonly batchWindowMs: number;
  readonly batchMaxEvents: number;
  readonly batchMaxBytes: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly fanOutBatchSize: number;
  /** Attempt records older than this are deleted (0 keeps them). */
  readonly attemptsRetentionDays: number;
  /** How long `stop` waits for outcomes to be written (DRAIN_MS by default). */
  readonly drainMs?: number;
}

const MAINTENANCE_MS = 60_000;
const DRAIN_MS = 10_000;

export class Dispatcher {
  readonly #stats: DispatcherStats;
  readonly #fanOut: FanOut;
  readonly #http: HttpDelivery;
  readonly #first: Lane;
  readonly #retry: Lane;
  readonly #writer: OutcomeWriter;
  readonly #outbox: Wakeup;
  readonly #reroutes = new Map<string, Promise<void>>();
  /** The last look for dead URLs with pending deliveries (#rerouteDeadUrls), awaited by stop(). */
  #deadScan: Promise<void> = Promise.resolve();
  /** URLs whose reroute was asked for again while one was running. */
  readonly #rerouteAgain = new Set<string>();
  readonly #keys = new Map<string, Buffer>();
  #timers = new Set<NodeJS.Timeout>();
  /** Callback URLs changed since the fan-out took first attempts for them from the log. */
  readonly #urlChanges: UrlChanges;
  #unlistenUrls: (() => Promise<void>) | null = null;
  #maintenance: NodeJS.Timeout | null = null;
  #stopped = false;

  constructor(
    private readonly db: Db,
    private readonly options: DispatcherOptions,
    private readonly log: Logger,
  ) {
    const retryPerUrl = Math.max(1, Math.ceil(options.urlConcurrency / 4));
    // A pool per callback URL id (URLs sharing a receiver's text each have theirs), with as many
    // connections as the URL may have requests in flight in both lanes: a request never waits
    // for a connection beyond what its lane allows (a pool left unbounded opens more, for
    // requests that come while a finished one's socket is still being checked).
    this.#http = new HttpDelivery({ allowList: parseAllowList(options.allowList), deadlineMs: options.timeoutMs, connectionsPerUrl: options.urlConcurrency + retryPerUrl });
    // A claim outlives its request (bounded by the deadline) and the write of its outcome.
    const leaseMs = 2 * options.timeoutMs + 1000;
    const laneOptions = { pollMs: options.pollMs, leaseMs, queueMs: options.timeoutMs, adaptive: options.adaptiveConcurrency };
    this.#first = new Lane(
      db,
      { ...laneOptions, retry: false, concurrency: options.concurrency, perUrl: options.urlConcurrency },
      (r) => this.#deliver(r),
      log,
      (r) => this.#writer.handOff(r),
    );
    this.#fanOut = new FanOut(
      db,
      {
        batchSize: options.fanOutBatchSize,
        pollMs: options.pollMs,
        leaseMs: options.leaseMs,
        grouping: { windowMs: options.batchWindowMs, maxEvents: options.batchMaxEvents, maxBytes: options.batchMaxBytes },
      },
      log,
      (dueInMs) => this.#wakeLanesIn(dueInMs),
      this.#first,
    );
    this.#stats = emptyStats(this.#fanOut.stats);
    this.#retry = new Lane(
      db,
      { ...laneOptions, retry: true, concurrency: options.retryConcurrency, perUrl: retryPerUrl },
      (r) => this.#deliver(r),
      log,
    );
    this.#writer = new OutcomeWriter(
      db.kysely,
      { retryScheduleSeconds: options.retryScheduleSeconds, maxBatch: 500, lingerMs: 2 },
      this.#stats,
      log,
      (urls) => {
        if (this.#stopped) return;
        for (const u of urls.dead) this.#reroute(u);
        // Changed while its failures were written (a PUT to dead): the reroute on hearing it
        // skipped the rows the write held, released now.
        for (const u of urls.retried) if (this.#urlChanges.since(u, urls.since)) this.#reroute(u);
      },
      (positions) => this.#fanOut.directDone(positions),
    );
    this.#outbox = new Wakeup(db, OUTBOX_CHANNEL, log);
    // A first attempt waits at most the lane's queue time (the deadline) before it is sent.
    this.#urlChanges = new UrlChanges(options.timeoutMs + MAINTENANCE_MS);
  }

  /** Cumulative counts (delivered, failed attempts, expired, dropped…), what is in flight, URLs throttled, latency. */
  get stats(): DispatcherStats {
    this.#syncInFlight();
    return this.#stats;
  }

  async start(): Promise<void> {
    try {
      this.#unlistenUrls = await this.db.listen(CALLBACK_URLS_CHANNEL, (id) => {
        this.#urlChanges.heard(id);
        // A new address, a revival or a deletion: what the URL earned by throttling is moot.
        this.#first.urlChanged(id);
        this.#retry.urlChanged(id);
        // A URL PUT to dead by its tenant: its pending deliveries go to the backup (or are
        // dropped) now, not when each is next due (a retry can be hours away). Nothing happens
        // for a URL that is not dead.
        if (this.#stopped) return;
        if (id === null) this.#deadScan = this.#rerouteDeadUrls();
        else if (/^\d+$/.test(id)) this.#reroute(BigInt(id));
      });
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'cannot LISTEN for callback URL changes; first attempts queued for a URL when it changes go to the URL as it was');
    }
    // URLs PUT to dead while no dispatcher listened (or this one's LISTEN is down: it hears
    // nothing of them then) still have their pending deliveries.
    this.#deadScan = this.#rerouteDeadUrls();
    await this.#fanOut.start();
    await this.#outbox.start();
    this.#first.start();
    this.#retry.start();
    void this.#relayOutboxNotifications();
    this.#maintenance = setInterval(() => void this.#prune(), MAINTENANCE_MS);
  }

  /** Graceful stop: no new claims, requests in flight finish (within the deadline), outcomes written. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#maintenance !== null) clearInterval(this.#maintenance);
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    // The fan-out stops reading but keeps its lease until the outcomes below are written.
    await this.#fanOut.halt();
    await Promise.all([this.#first.stop(), this.#retry.stop()]);
    // Outcomes not written by then are repeated after their claims expire, or by the next
    // fan-out holder's recovery for first attempts sent from the log (at-least-once); the writer
    // stops trying (the database is about to be closed, and its retries would keep the process alive).
    await Promise.race([this.#writer.drain(), sleep(this.options.drainMs ?? DRAIN_MS, undefined, { ref: false })]);
    this.#writer.stop();
    await this.#fanOut.release();
    await this.#deadScan;
    await Promise.all([...this.#reroutes.values()]);
    await this.#outbox.stop();
    await this.#unlistenUrls?.();
    await this.#http.close();
    this.#syncInFlight();
  }

  /** Claims now in both lanes (tests and the fan-out call this). */
  wake(): void {
    this.#first.signal();
    this.#retry.signal();
  }

  async #relayOutboxNotifications(): Promise<void> {
    while (!this.#stopped) {
      await this.#outbox.wait(60_000);
      if (this.#stopped) return;
      this.wake();
    }
  }

  #wakeLanesIn(ms: number): void {
    if (ms <= 0) return this.#first.signal();
    const t = setTimeout(() => {
      this.#timers.delete(t);
      this.#first.signal();
    }, ms + 5);
    this.#timers.add(t);
  }

  #syncInFlight(): void {
    this.#stats.inFlight.first = this.#first.inFlight;
    this.#stats.inFlight.retry = this.#retry.inFlight;
    this.#stats.queued = this.#first.queued;
    this.#stats.throttledUrls.first = this.#first.throttledUrls;
    this.#stats.throttledUrls.retry = this.#retry.throttledUrls;
  }

  /** Sends one claimed delivery and queues its outcome for the writer; null when it was not sent (rerouted or split). */
  async #deliver(row: ClaimedDelivery): Promise<HttpOutcome | null> {
    if (row.direct !== null && this.#urlChanges.since(row.urlId, row.createdAt.getTime())) {
      // Taken from the log with the URL as it was before a change (url-changes.ts): handed to the
      // outbox, whose claim reads the URL as it is now (not written for a URL deleted or given
      // another event type: insertFreshRows).
      this.#writer.handOff(row);
      return null;
    }
    if (row.target.status !== 'alive') {
      await releaseClaims(this.db.kysely, [row]);
      this.#reroute(row.urlId);
      return null;
    }
    if (row.target.version === 1 && isVersion2Batch(row.webhookId, row.eventCount)) {
      await splitForVersion1(this.db.kysely, row);
      this.#first.signal();
      return null;
    }
    const body = row.target.version === 2 ? `[${row.body}]` : row.body;
    const headers = signatureHeaders(this.#key(row.target.secret), row.webhookId, body);
    const attemptedAt = new Date();
    const http = await this.#http.post(row.target.url, { ...headers }, body, String(row.urlId));
    this.#writer.push({ delivery: row, http, attemptedAt });
    return http;
  }

  /** A secret's key bytes, decoded once. */
  #key(secret: string): Buffer {
    let key = this.#keys.get(secret);
    if (key === undefined) {
      if (this.#keys.size >= 10_000) this.#keys.clear();
      key = signingKey(secret);
      this.#keys.set(secret, key);
    }
    return key;
  }

  /** Reroutes every dead URL that still has pending deliveries (`retry` named for the outbox's index). */
  async #rerouteDeadUrls(): Promise<void> {
    try {
      const rows = await sql<{ id: bigint }>`
        SELECT u.id FROM callback_urls u WHERE u.status = 'dead' AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.retry = ANY(ARRAY[false, true]) AND d.url_id = u.id)`.execute(this.db.kysely);
      for (const r of rows.rows) if (!this.#stopped) this.#reroute(BigInt(r.id));
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'cannot look for dead webhook URLs with pending deliveries; they are rerouted when next due');
    }
  }

  /**
   * Moves a dead URL's pending rows to its backup (or drops them); one run per URL at a time,
   * and one more after it when asked meanwhile (the run going on may have read the URL before
   * the change that asked).
   */
  #reroute(urlId: bigint): void {
    const key = String(urlId);
    if (this.#reroutes.has(key)) {
      this.#rerouteAgain.add(key);
      return;
    }
    const run = rerouteDeadUrl(this.db.kysely, urlId)
      .then((r) => {
        this.#stats.rerouted += r.moved;
        this.#stats.dropped += r.dropped;
        this.#stats.droppedEvents += r.droppedEvents;
        if (r.moved > 0) this.#first.signal();
        if (r.moved + r.dropped > 0) this.log.info({ urlId: key, ...r }, 'webhook URL is dead: its pending deliveries were rerouted or dropped');
      })
      .catch((err: unknown) => this.log.warn({ err: describeError(err), urlId: key }, 'cannot reroute a dead URL yet; its rows are retried when due'))
      .finally(() => {
        this.#reroutes.delete(key);
        if (this.#rerouteAgain.delete(key) && !this.#stopped) this.#reroute(urlId);
      });
    this.#reroutes.set(key, run);
  }

  /**
   * Housekeeping, by the fan-out's lease holder: attempts past their retention, and outbox rows
   * of a URL deleted while the fan-out was enqueueing for it (nothing would ever claim them).
   */
  async #prune(): Promise<void> {
    if (!this.#fanOut.stats.held) return;
    try {
      if (this.options.attemptsRetentionDays > 0) {
        await sql`DELETE FROM webhook_attempts WHERE attempted_at < now() - make_interval(days => ${this.options.attemptsRetentionDays})`.execute(this.db.kysely);
      }
      await sql`DELETE FROM webhook_deliveries AS d WHERE NOT EXISTS (SELECT 1 FROM callback_urls AS u WHERE u.id = d.url_id)`.execute(this.db.kysely);
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'webhook housekeeping failed; trying again later');
    }
  }
}
