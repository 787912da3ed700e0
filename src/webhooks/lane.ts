import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/connect.js';
import { nextTurn } from '../db/next-turn.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';
import { type ClaimedDelivery, claimDue } from './outbox.js';
import { Wakeup } from '../log/wakeup.js';
import type { HttpOutcome } from './http-delivery.js';
import { UrlLimits } from './url-limits.js';
import { BehindMarks } from './behind-marks.js';
import { FirstAttemptQueues, type Queued } from './first-attempt-queues.js';
import { LanePace } from './lane-pace.js';

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
  /** URLs that may have due rows left unclaimed because they were at their cap here (behind-marks.ts). */
  readonly #behind: BehindMarks;
  /** First attempts from the fan-out queued per URL, and whose turn a freed slot is (first-attempt-queues.ts). */
  readonly #queues: FirstAttemptQueues;
  /** The fan-out's pace (lane-pace.ts). */
  readonly #pace: LanePace;
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
    this.#behind = new BehindMarks(options.perUrl);
    this.#queues = new FirstAttemptQueues(options.concurrency, options.perUrl, options.pollMs, (url) => this.#startQueued(url));
    this.#pace = new LanePace(options.concurrency);
  }

  /** A callback URL changed (null: any may have): its concurrency starts again at the cap (url-limits.ts). */
  urlChanged(urlId: string | null): void {
    if (urlId === null) this.#limits.forgetAll();
    else this.#limits.forget(urlId, this.#inFlight.get(urlId) ?? 0);
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
    return this.#queues.total;
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
    const queued = this.#queues.drain();
    this.#pace.clear();
    for (const row of queued) this.handOff(row);
    await Promise.all([...this.#running]);
  }

  async #run(): Promise<void> {
    const o = this.options;
    const minClaim = Math.max(1, Math.min(16, Math.ceil(o.concurrency / 8)));
    let failures = 0;
    while (!this.#stopped) {
      // One turn per claim: on the embedded database a backlog would keep the thread (next-turn.ts).
      await nextTurn();
      const free = o.concurrency - this.#total;
      if (free <= 0 || (this.#total > 0 && free < minClaim && this.#queues.leftForOutbox === 0)) {
        await this.#wakeup.wait(5);
        continue;
      }
      const room = new Map<string, number>(this.#limits.lowered());
      for (const [url, n] of this.#inFlight) room.set(url, Math.max(0, this.#limits.of(url) - n));
      // A URL with rows queued here fills its free slots from its queue, but for those it left
      // for its outbox rows (every other one while it may have some: see #startQueued).
      for (const url of this.#queues.byUrl.keys()) room.set(url, Math.max(0, this.#limits.of(url) - (this.#inFlight.get(url) ?? 0)));
      this.#queues.leftForOutbox = 0;
      const after = this.#cursor;
      const marks = this.#behind.snapshot();
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
      this.#behind.note(rows, room, after === 0n && rows.length < free ? marks : null);
      this.#queues.afterOutboxTurn(rows, room, after === 0n && rows.length < free);
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

  /** Rows of this URL were left unclaimed at its cap (committed by now): its next finished request claims again. */
  markBehind(urlId: bigint): void {
    this.#behind.mark(String(urlId));
    this.#queues.outboxGains(String(urlId));
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
    if (this.#total < o.concurrency && n < this.#limits.of(url) && !this.#queues.byUrl.has(url)) {
      this.#inFlight.set(url, n + 1);
      this.#total += 1;
      return 'reserved';
    }
    if (this.#queues.promise(url)) return 'queued';
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
    else this.#queues.unpromise(String(urlId));
  }

  /** Starts a row claimed on a slot `reserve` gave. */
  startReserved(row: ClaimedDelivery): void {
    this.#launch(row);
  }

  /** Resolves once the lane can start what the fan-out would read next, or after `maxWaitMs` at most (lane-pace.ts). True if it waited. */
  room(maxWaitMs: number): Promise<boolean> {
    return this.#pace.room(maxWaitMs, this.#stopped);
  }

  /** How many more first attempts from the fan-out could start or queue here now (over all URLs). */
  capacity(): number {
    if (this.#stopped) return 0;
    const o = this.options;
    return Math.max(0, o.concurrency - this.#total) + Math.max(0, this.#queues.cap - this.#queues.total);
  }

  /** Queues a first attempt on a place `reserve` gave; `claimedAt`: local clock before the place was taken. */
  enqueue(row: ClaimedDelivery, claimedAt: number): void {
    const url = String(row.urlId);
    let queue = this.#queues.byUrl.get(url);
    if (queue === undefined) this.#queues.byUrl.set(url, (queue = []));
    if (queue.length < this.options.perUrl) this.#pace.backlog += 1;
    queue.push({ row, startBy: claimedAt + this.options.queueMs });
    this.#startQueued(url);
  }

  /** Starts the URL's queued rows its free slots allow; drops those whose time is up. */
  #startQueued(url: string): void {
    const queue = this.#queues.byUrl.get(url);
    if (queue === undefined) return;
    const o = this.options;
    const now = Date.now();
    const limit = this.#limits.of(url);
    while (queue.length > 0 && !this.#stopped && this.#total < o.concurrency && (this.#inFlight.get(url) ?? 0) < limit) {
      if (this.#queues.outboxTurn.delete(url)) {
        // This slot is the outbox rows' turn: left free for a claim.
        this.#queues.leftForOutbox += 1;
        this.#wakeup.signal();
        break;
      }
      const next = queue.shift() as Queued;
      if (queue.length < o.perUrl) this.#pace.backlog -= 1;
      this.#queues.unpromise(url);
      if (next.startBy < now) {
        this.#queues.outboxGains(url);
        this.handOff(next.row);
      } else this.#start(next.row);
      if (this.#queues.mayHaveOutboxRows(url, now)) this.#queues.outboxTurn.add(url);
    }
    this.#pace.wakeIfRoom();
    if (queue.length > 0) return;
    this.#queues.forget(url);
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
          if (outcome !== null) this.#limits.observe(url, outcome, this.#inFlight.get(url) ?? 1, this.#queues.byUrl.has(url));
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
    if (this.#queues.byUrl.size > 0) {
      this.#startQueued(url);
      // A slot of the full lane goes to any URL whose queue waited for one.
      if (laneWasFull) for (const other of this.#queues.byUrl.keys()) if (other !== url && this.#total < this.options.concurrency) this.#startQueued(other);
      if (this.#queues.byUrl.has(url)) return;
    }
    // Claim again only if a cap was what held rows back (this URL's, or the lane's);
    // otherwise new work comes with its own signal.
    if (before >= this.#limits.of(url) || this.#full || this.#behind.has(url)) this.#wakeup.signal();
  }
}
