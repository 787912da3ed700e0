import type { ClaimedDelivery } from './outbox.js';

/**
 * The lane's per-URL queues of first attempts from the fan-out waiting for a slot, with the
 * places promised in them, and the "outbox turn" bookkeeping: while a URL has both a queue and
 * due outbox rows, its freed slots alternate between the two (see lane.ts).
 */

/** First attempts from the fan-out a URL (or the lane) may hold queued per slot of its own. */
const QUEUE_PER_SLOT = 16;

export interface Queued {
  row: ClaimedDelivery;
  /** Local clock (ms) after which it is left to its lease. */
  startBy: number;
}

export class FirstAttemptQueues {
  /** First attempts from the fan-out queued per URL, oldest first; and how many are queued or promised over all URLs and per URL. */
  readonly byUrl = new Map<string, Queued[]>();
  readonly #promised = new Map<string, number>();
  total = 0;
  /** URLs with a queue whose next freed slot is left for a claim of their outbox rows. */
  readonly outboxTurn = new Set<string>();
  /** URLs with a queue found with no due outbox rows by a whole sweep, and when (local clock, ms). */
  readonly noOutboxRows = new Map<string, number>();
  /** Slots of URLs with a queue left free for a claim of their outbox rows. */
  leftForOutbox = 0;

  constructor(
    private readonly concurrency: number,
    private readonly perUrl: number,
    private readonly pollMs: number,
    /** The lane's: starts the URL's queued rows its free slots allow. */
    private readonly startQueued: (url: string) => void,
  ) {}

  /** First attempts from the fan-out the lane may hold queued over all URLs. */
  get cap(): number {
    return this.concurrency * QUEUE_PER_SLOT;
  }

  /** Takes a place in the URL's queue, if the lane and the URL have one left. */
  promise(url: string): boolean {
    const promised = this.#promised.get(url) ?? 0;
    if (this.total < this.cap && promised < this.perUrl * QUEUE_PER_SLOT) {
      this.#promised.set(url, promised + 1);
      this.total += 1;
      return true;
    }
    return false;
  }

  unpromise(url: string): void {
    const promised = this.#promised.get(url) ?? 1;
    if (promised <= 1) this.#promised.delete(url);
    else this.#promised.set(url, promised - 1);
    this.total -= 1;
  }

  /** Empties every queue: the rows that were queued, oldest first per URL. */
  drain(): ClaimedDelivery[] {
    const queued = [...this.byUrl.values()].flatMap((q) => q.map((e) => e.row));
    this.byUrl.clear();
    this.total = 0;
    return queued;
  }

  /**
   * After a claim, for the URLs with a queue: one given every slot it had free may have more
   * outbox rows; after a whole sweep (`swept`), one given fewer has none due now, and its queue
   * takes the slots back.
   */
  afterOutboxTurn(rows: readonly ClaimedDelivery[], room: ReadonlyMap<string, number>, swept: boolean): void {
    if (this.byUrl.size === 0) return;
    const got = new Map<string, number>();
    for (const r of rows) got.set(String(r.urlId), (got.get(String(r.urlId)) ?? 0) + 1);
    for (const url of [...this.byUrl.keys()]) {
      const asked = room.get(url) ?? 0;
      if (asked === 0) continue;
      const n = got.get(url) ?? 0;
      if (n >= asked) this.noOutboxRows.delete(url);
      else if (swept) {
        this.noOutboxRows.set(url, Date.now());
        this.outboxTurn.delete(url);
        this.startQueued(url);
      }
    }
  }

  /** Whether a URL with a queue may have due outbox rows: unless a sweep found none lately (within a poll). */
  mayHaveOutboxRows(url: string, now: number): boolean {
    const seen = this.noOutboxRows.get(url);
    return seen === undefined || now - seen > this.pollMs;
  }

  /** A row of this URL goes to the outbox: its next freed slot may be the outbox's turn. */
  outboxGains(url: string): void {
    this.noOutboxRows.delete(url);
  }

  /** The URL's queue ran dry: it goes, with its turn bookkeeping. */
  forget(url: string): void {
    this.byUrl.delete(url);
    this.outboxTurn.delete(url);
    this.noOutboxRows.delete(url);
  }
}
