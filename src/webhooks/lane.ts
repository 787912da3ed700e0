import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';
import { type ClaimedDelivery, claimDue } from './outbox.js';
import { Wakeup } from '../log/wakeup.js';
import type { HttpOutcome } from './http-delivery.js';
import { UrlLimits } from './url-limits.js';

/**
 * One lane of delivery work — first attempts or retries — with its own concurrency: at most
 * `concurrency` requests in flight and, for any one URL, at most its limit: `perUrl`, or less
 * after the URL throttled or timed out (url-limits.ts). A lane claims only
 * what it can start at once (each URL's free slots), URL by URL in round-robin order, so a URL
 * that hangs holds its own few slots and nothing else: other URLs keep their pace.
 *
 * First attempts the fan-out of this process sends straight from the log start at once if
 * their URL has a free slot, or wait in the URL's queue here for one (up to QUEUE_PER_SLOT rows
 * per slot, `queueMs` each): no outbox row, no claim query. One whose time is up in the queue,
 * or still queued when the lane stops, is handed to the outbox (`handOff`) and claimed like
 * any other row. While a URL has both, its freed slots alternate between its queue and its due
 * outbox rows (those handed off, spilled over, replayed, rerouted), so neither waits for the
 * other to run dry: a slot left for the outbox goes back to the queue when a claim finds none.
 */

export interface LaneOptions {
  readonly retry: boolean;
  readonly concurrency: number;
  readonly perUrl: number;
  /** A URL that throttles or times out is held below `perUrl` a while (url-limits.ts). */
  readonly adaptive: boolean;
  readonly pollMs: number;
  /** How long a claim holds a row (the HTTP deadline plus margin). */
  readonly leaseMs: number;
  /** How long a first attempt from the fan-out may wait for a slot here. */
  readonly queueMs: number;
}

/** First attempts from the fan-out a URL (or the lane) may hold queued per slot of its own. */
const QUEUE_PER_SLOT = 16;

interface Queued {
  row: ClaimedDelivery;
  /** Local clock (ms) after which it is left to its lease. */
  startBy: number;
}

export class Lane {
  readonly #inFlight = new Map<string, number>();
  #total = 0;
  #cursor = 0n;
  /** The last claim filled the lane (or nearly): a freed slot may let more rows in. */
  #full = false;
  #stopped = false;
  #loop: Promise<void> | null = null;
  readonly #running = new Set<Promise<void>>();
  readonly #wakeup: Wakeup;
  /**
   * URLs that may have due rows left unclaimed because they were at their cap here, each with
   * the mark of when that was last seen: a request of theirs that finishes claims again.
   */
  readonly #behind = new Map<string, number>();
  #mark = 0;
  /** First attempts from the fan-out queued per URL, oldest first; and how many are queued or promised over all URLs and per URL. */
  readonly #queues = new Map<string, Queued[]>();
  readonly #promised = new Map<string, number>();
  #queuedTotal = 0;
  /**
   * Queued first attempts counted for the fan-out's pace: each URL's queue up to `perUrl` rows,
   * so a URL that answers slowly (its queue always full) weighs no more than its slots.
   */
  #backlog = 0;
  /** URLs with a queue whose next freed slot is left for a claim of their outbox rows. */
  readonly #outboxTurn = new Set<string>();
  /** URLs with a queue found with no due outbox rows by a whole sweep, and when (local clock, ms). */
  readonly #noOutboxRows = new Map<string, number>();
  /** Slots of URLs with a queue left free for a claim of their outbox rows. */
  #leftForOutbox = 0;
  /** The fan-out waiting for the backlog to fall below the mark. */
  #roomWaiters: (() => void)[] = [];
  readonly #limits: UrlLimits;

  constructor(
    private readonly db: Db,
    private readonly options: LaneOptions,
    /** Sends a row; its outcome (null: not sent) moves the URL's limit. */
    private readonly deliver: (row: ClaimedDelivery) => Promise<HttpOutcome | null>,
    private readonly log: Logger,
    /** A first attempt from the fan-out that will not be sent here: it goes to the outbox. */
    private readonly handOff: (row: ClaimedDelivery) => void = () => {},
  ) {
    this.#wakeup = new Wakeup(db, null, log);
    this.#limits = new UrlLimits(options.perUrl, options.adaptive);
  }

  /** How many URLs are held below `perUrl` now. */
  get throttledUrls(): number {
    return [...this.#limits.lowered()].length;
  }

  get inFlight(): number {
    return this.#total;
  }

  /** First attempts from the fan-out waiting here for a slot (or about to). */
  get queued(): number {
    return this.#queuedTotal;
  }

  /** How long a claim holds a row. */
  get leaseMs(): number {
    return this.options.leaseMs;
  }

  start(): void {
    this.#loop = this.#run();
  }

  /** Something may be due: claim now rather than at the next poll. */
  signal(): void {
    this.#wakeup.signal();
  }

  /** Stops claiming, hands the queued first attempts to the outbox and waits for the requests in flight to finish. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wakeup.signal();
    await this.#loop;
    const queued = [...this.#queues.values()].flatMap((q) => q.map((e) => e.row));
    this.#queues.clear();
    this.#queuedTotal = 0;
    this.#backlog = 0;
    this.#wakeRoomWaiters();
    for (const row of queued) this.handOff(row);
    await Promise.all([...this.#running]);
  }

  async #run(): Promise<void> {
    const o = this.options;
    const minClaim = Math.max(1, Math.min(16, Math.ceil(o.concurrency / 8)));
    let failures = 0;
    while (!this.#stopped) {
      const free = o.concurrency - this.#total;
      if (free <= 0 || (this.#total > 0 && free < minClaim && this.#leftForOutbox === 0)) {
        await this.#wakeup.wait(5);
        continue;
      }
      const room = new Map<string, number>(this.#limits.lowered());
      for (const [url, n] of this.#inFlight) room.set(url, Math.max(0, this.#limits.of(url) - n));
      // A URL with rows queued here fills its free slots from its queue, but for those it left
      // for its outbox rows (every other one while it may have some: see #startQueued).
      for (const url of this.#queues.keys()) room.set(url, Math.max(0, this.#limits.of(url) - (this.#inFlight.get(url) ?? 0)));
      this.#leftForOutbox = 0;
      const after = this.#cursor;
      const marks = new Map(this.#behind);
      let rows: ClaimedDelivery[];
      try {
        rows = await claimDue(this.db.kysely, { retry: o.retry, limit: free, perUrl: o.perUrl, room, after, leaseMs: o.leaseMs, claim: randomUUID() });
        failures = 0;
      } catch (err) {
        failures += 1;
        this.log.warn({ err: describeError(err), lane: o.retry ? 'retry' : 'first' }, 'cannot claim webhook deliveries; retrying');
        await sleep(Math.min(10_000, 100 * 2 ** Math.min(failures, 7)));
        continue;
      }
      for (const row of rows) this.#start(row);
      this.#full = o.concurrency - this.#total < minClaim;
      this.#noteBehind(rows, room, after === 0n && rows.length < free ? marks : null);
      this.#afterOutboxTurn(rows, room, after === 0n && rows.length < free);
      const last = rows.at(-1);
      if (rows.length >= free && last !== undefined) {
        this.#cursor = last.urlId;
        continue;
      }
      // Fewer than asked: the URLs after the cursor are done; go round again from the start.
      this.#cursor = 0n;
      if (after !== 0n) continue;
      await this.#wakeup.wait(o.pollMs);
    }
  }

  /**
   * After a claim: a URL given all the rows it had room for may have more; and after a full
   * sweep (`marks` given), a URL given fewer has none left, unless marked again meanwhile.
   */
  #noteBehind(rows: readonly ClaimedDelivery[], room: ReadonlyMap<string, number>, marks: ReadonlyMap<string, number> | null): void {
    const got = new Map<string, number>();
    for (const r of rows) got.set(String(r.urlId), (got.get(String(r.urlId)) ?? 0) + 1);
    for (const [url, n] of got) if (n >= (room.get(url) ?? this.options.perUrl)) this.#behind.set(url, ++this.#mark);
    if (marks === null) return;
    for (const [url, mark] of marks) {
      if (this.#behind.get(url) === mark && (got.get(url) ?? 0) < (room.get(url) ?? this.options.perUrl)) this.#behind.delete(url);
    }
  }

  /**
   * After a claim, for the URLs with a queue: one given every slot it had free may have more
   * outbox rows; after a whole sweep (`swept`), one given fewer has none due now, and its queue
   * takes the slots back.
   */
  #afterOutboxTurn(rows: readonly ClaimedDelivery[], room: ReadonlyMap<string, number>, swept: boolean): void {
    if (this.#queues.size === 0) return;
    const got = new Map<string, number>();
    for (const r of rows) got.set(String(r.urlId), (got.get(String(r.urlId)) ?? 0) + 1);
    for (const url of [...this.#queues.keys()]) {
      const asked = room.get(url) ?? 0;
      if (asked === 0) continue;
      const n = got.get(url) ?? 0;
      if (n >= asked) this.#noOutboxRows.delete(url);
      else if (swept) {
        this.#noOutboxRows.set(url, Date.now());
        this.#outboxTurn.delete(url);
        this.#startQueued(url);
      }
    }
  }

  /** Whether a URL with a queue may have due outbox rows: unless a sweep found none lately (within a poll). */
  #mayHaveOutboxRows(url: string, now: number): boolean {
    const seen = this.#noOutboxRows.get(url);
    return seen === undefined || now - seen > this.options.pollMs;
  }

  /** A row of this URL goes to the outbox: its next freed slot may be the outbox's turn. */
  #outboxGains(url: string): void {
    this.#noOutboxRows.delete(url);
  }

  /** Rows of this URL were left unclaimed at its cap (committed by now): its next finished request claims again. */
  markBehind(urlId: bigint): void {
    this.#behind.set(String(urlId), ++this.#mark);
    this.#outboxGains(String(urlId));
  }

  /**
   * For a row this process claims as it enqueues it (a first attempt the fan-out hands over
   * after its commit): takes a slot ('reserved'), or a place in the URL's queue ('queued'), or
   * says which cap has no room.
   */
  reserve(urlId: bigint): 'reserved' | 'queued' | 'url full' | 'lane full' {
    const url = String(urlId);
    const n = this.#inFlight.get(url) ?? 0;
    const o = this.options;
    if (this.#stopped) return 'lane full';
    if (this.#total < o.concurrency && n < this.#limits.of(url) && !this.#queues.has(url)) {
      this.#inFlight.set(url, n + 1);
      this.#total += 1;
      return 'reserved';
    }
    const promised = this.#promised.get(url) ?? 0;
    if (this.#queuedTotal < this.#queueCap && promised < o.perUrl * QUEUE_PER_SLOT) {
      this.#promised.set(url, promised + 1);
      this.#queuedTotal += 1;
      return 'queued';
    }
    // A slot freed later must look for the rows left unclaimed: the URL's next finished
    // request claims again (see #release), or any one if the lane was full.
    if (this.#total >= o.concurrency) {
      this.#full = true;
      return 'lane full';
    }
    return 'url full';
  }

  /** Gives back what `reserve` gave for a row that will not come (its transaction failed). */
  unreserve(urlId: bigint, kind: 'reserved' | 'queued'): void {
    if (kind === 'reserved') this.#release(String(urlId));
    else this.#unpromise(String(urlId));
  }

  /** Starts a row claimed on a slot `reserve` gave. */
  startReserved(row: ClaimedDelivery): void {
    this.#launch(row);
  }

  /**
   * Resolves once the lane can start what the fan-out would read next: at once, unless the
   * queued first attempts (each URL's counted up to its slots) reach half the lane's concurrency;
   * then when they fall below that, or after `maxWaitMs` at most (so URLs that answer slowly,
   * however many, only slow the fan-out down, never stop it). Without this pace the fan-out,
   * reading a backlog faster than it can be sent, fills every URL's queue and writes the rest
   * into the outbox, which costs Postgres a row, a claim and a delete for each. True if it waited.
   */
  room(maxWaitMs: number): Promise<boolean> {
    if (this.#backlog < this.#backlogMark || this.#stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      // Timed out: no longer waiting (a saturated lane must not collect one waiter per poll).
      const timer = setTimeout(() => {
        this.#roomWaiters = this.#roomWaiters.filter((w) => w !== done);
        done();
      }, maxWaitMs);
      this.#roomWaiters.push(done);
    });
  }

  /** How many more first attempts from the fan-out could start or queue here now (over all URLs). */
  capacity(): number {
    if (this.#stopped) return 0;
    const o = this.options;
    return Math.max(0, o.concurrency - this.#total) + Math.max(0, this.#queueCap - this.#queuedTotal);
  }

  /** First attempts from the fan-out the lane may hold queued over all URLs. */
  get #queueCap(): number {
    return this.options.concurrency * QUEUE_PER_SLOT;
  }

  get #backlogMark(): number {
    return Math.max(1, Math.floor(this.options.concurrency / 2));
  }

  #wakeRoomWaiters(): void {
    const waiters = this.#roomWaiters;
    this.#roomWaiters = [];
    for (const w of waiters) w();
  }

  /** Queues a first attempt on a place `reserve` gave; `claimedAt`: local clock before the place was taken. */
  enqueue(row: ClaimedDelivery, claimedAt: number): void {
    const url = String(row.urlId);
    let queue = this.#queues.get(url);
    if (queue === undefined) this.#queues.set(url, (queue = []));
    if (queue.length < this.options.perUrl) this.#backlog += 1;
    queue.push({ row, startBy: claimedAt + this.options.queueMs });
    this.#startQueued(url);
  }

  #unpromise(url: string): void {
    const promised = this.#promised.get(url) ?? 1;
    if (promised <= 1) this.#promised.delete(url);
    else this.#promised.set(url, promised - 1);
    this.#queuedTotal -= 1;
  }

  /** Starts the URL's queued rows its free slots allow; drops those whose time is up. */
  #startQueued(url: string): void {
    const queue = this.#queues.get(url);
    if (queue === undefined) return;
    const o = this.options;
    const now = Date.now();
    const limit = this.#limits.of(url);
    while (queue.length > 0 && !this.#stopped && this.#total < o.concurrency && (this.#inFlight.get(url) ?? 0) < limit) {
      if (this.#outboxTurn.delete(url)) {
        // This slot is the outbox rows' turn: left free for a claim.
        this.#leftForOutbox += 1;
        this.#wakeup.signal();
        break;
      }
      const next = queue.shift() as Queued;
      if (queue.length < o.perUrl) this.#backlog -= 1;
      this.#unpromise(url);
      if (next.startBy < now) {
        this.#outboxGains(url);
        this.handOff(next.row);
      } else this.#start(next.row);
      if (this.#mayHaveOutboxRows(url, now)) this.#outboxTurn.add(url);
    }
    if (this.#roomWaiters.length > 0 && this.#backlog < this.#backlogMark) this.#wakeRoomWaiters();
    if (queue.length > 0) return;
    this.#queues.delete(url);
    this.#outboxTurn.delete(url);
    this.#noOutboxRows.delete(url);
  }

  #start(row: ClaimedDelivery): void {
    const url = String(row.urlId);
    this.#inFlight.set(url, (this.#inFlight.get(url) ?? 0) + 1);
    this.#total += 1;
    this.#launch(row);
  }

  /** Runs a delivery on a slot already counted. */
  #launch(row: ClaimedDelivery): void {
    const url = String(row.urlId);
    // One handler pair: only a failed delivery (never the limit's bookkeeping after a sent one) hands a row off.
    const task = this.deliver(row)
      .then(
        (outcome) => {
          if (outcome !== null) this.#limits.observe(url, outcome, this.#inFlight.get(url) ?? 1, this.#queues.has(url));
        },
        (err: unknown) => {
          this.log.error({ err: describeError(err), delivery: row.webhookId }, 'webhook delivery failed unexpectedly');
          // A first attempt from the log has no row a lease would bring back: the outbox takes it.
          if (row.direct !== null) this.handOff(row);
        },
      )
      .finally(() => {
        this.#running.delete(task);
        this.#release(url);
      });
    this.#running.add(task);
  }

  #release(url: string): void {
    const before = this.#inFlight.get(url) ?? 1;
    if (before <= 1) this.#inFlight.delete(url);
    else this.#inFlight.set(url, before - 1);
    const laneWasFull = this.#total >= this.options.concurrency;
    this.#total -= 1;
    if (this.#queues.size > 0) {
      this.#startQueued(url);
      // A slot of the full lane goes to any URL whose queue waited for one.
      if (laneWasFull) for (const other of this.#queues.keys()) if (other !== url && this.#total < this.options.concurrency) this.#startQueued(other);
      if (this.#queues.has(url)) return;
    }
    // Claim again only if a cap was what held rows back (this URL's, or the lane's);
    // otherwise new work comes with its own signal.
    if (before >= this.#limits.of(url) || this.#full || this.#behind.has(url)) this.#wakeup.signal();
  }
}
