import type { HttpOutcome } from './http-delivery.js';

/**
 * Adaptive concurrency per callback URL: how many requests a lane lets a URL have in flight,
 * between 1 and the configured cap, moved by AIMD on the URL's answers.
 *
 * - Multiplicative decrease: a throttle answer (429, 502, 503, 504) or a timeout halves the
 *   URL's limit, at most once per round (the answers to requests already in flight when it was
 *   halved do not halve it again).
 * - Additive increase: any other answer that came while the URL used every slot it had (or had
 *   deliveries waiting for one) counts toward one more slot, given per `limit` such answers
 *   (about one slot per round of requests), back up to the cap.
 *
 * A receiver asking for less (or hanging) is sent less and holds a slot or two of the lane
 * instead of its whole cap; one that keeps up is never held below the cap. A refused connection
 * or another error before any answer moves nothing (it says nothing of the receiver's load).
 * Latency alone does not lower a limit: on a busy dispatcher it rises for every URL at once,
 * and lowering them all only queued more deliveries in the outbox.
 *
 * A URL that has not throttled or timed out for RECOVER_MS is back at the cap, however little it
 * was used meanwhile (the increase needs the URL busy: a quiet URL, a dead one, would otherwise
 * stay held for good), and a URL that changed (a new address, revived, deleted: `forget`) starts
 * again at the cap at once, the answers to requests sent before the change not counted (they
 * came from the old address, or the old state of the receiver).
 */

/** A URL with no throttle answer or timeout for this long is back at the cap. */
export const RECOVER_MS = 60_000;

/** URLs remembered at most; past this, all are forgotten (and start again at their cap). */
const MAX_URLS = 10_000;
const THROTTLE_STATUSES = new Set([429, 502, 503, 504]);

interface UrlState {
  limit: number;
  /** Answers counted toward the next slot (one more slot per `limit` of them). */
  credit: number;
  /** Answers still to come from requests sent before the last decrease (no second decrease meanwhile). */
  holdFor: number;
  /** When it last throttled or timed out (the clock's ms). */
  throttledAt: number;
}

export type Answer = Pick<HttpOutcome, 'statusCode' | 'errorClass'>;

/** An answer that asks for less: a timeout or a throttle status. */
const isThrottle = (a: Answer): boolean => a.errorClass === 'timeout' || (a.statusCode !== null && THROTTLE_STATUSES.has(a.statusCode));

export class UrlLimits {
  /** URLs below the cap (or just throttled); the others are at the cap. */
  readonly #urls = new Map<string, UrlState>();

  constructor(
    /** The cap: WEBHOOK_URL_CONCURRENCY (a quarter of it on the retry lane). */
    readonly max: number,
    /** Off: every URL keeps `max`. */
    private readonly adaptive: boolean = true,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Requests the URL may have in flight now. */
  of(url: string): number {
    return this.#state(url)?.limit ?? this.max;
  }

  /** URLs held below the cap now, with their limits. */
  *lowered(): IterableIterator<[string, number]> {
    // #state may delete the entry it reads: a Map's iteration goes on past a deletion.
    for (const url of this.#urls.keys()) {
      const s = this.#state(url);
      if (s !== undefined && s.limit < this.max) yield [url, s.limit];
    }
  }

  /**
   * The URL changed (its address, its status, or it was deleted): back at the cap. `inFlight`:
   * its requests sent before the change, whose answers then move nothing.
   */
  forget(url: string, inFlight = 0): void {
    if (this.adaptive && inFlight > 0) this.#urls.set(url, { limit: this.max, credit: 0, holdFor: inFlight, throttledAt: this.clock() });
    else this.#urls.delete(url);
  }

  /** Every URL back at the cap (any of them may have changed). */
  forgetAll(): void {
    this.#urls.clear();
  }

  /** A URL's state, dropped once it has been quiet for RECOVER_MS. */
  #state(url: string): UrlState | undefined {
    const s = this.#urls.get(url);
    if (s !== undefined && this.clock() - s.throttledAt >= RECOVER_MS) {
      this.#urls.delete(url);
      return undefined;
    }
    return s;
  }

  /**
   * One outcome of `url`. `inFlight`: the URL's requests in flight when it came, itself
   * included; `waiting`: more of the URL's deliveries wait for a slot here.
   */
  observe(url: string, answer: Answer, inFlight: number, waiting: boolean): void {
    if (!this.adaptive) return;
    let s = this.#state(url);
    const holding = s !== undefined && s.holdFor > 0;
    if (s !== undefined && holding) s.holdFor -= 1;
    if (isThrottle(answer)) {
      if (holding) return;
      if (s === undefined) {
        if (this.#urls.size >= MAX_URLS) this.#urls.clear();
        s = { limit: this.max, credit: 0, holdFor: 0, throttledAt: 0 };
        this.#urls.set(url, s);
      }
      s.throttledAt = this.clock();
      s.limit = Math.max(1, Math.floor(s.limit / 2));
      s.credit = 0;
      s.holdFor = inFlight - 1;
      return;
    }
    if (s === undefined) return;
    if (s.limit < this.max && answer.statusCode !== null && (waiting || inFlight >= s.limit)) {
      s.credit += 1;
      if (s.credit >= s.limit) {
        s.limit += 1;
        s.credit = 0;
      }
    }
    // At the cap, with no answers left to pass over: nothing to remember.
    if (s.limit >= this.max && s.holdFor === 0) this.#urls.delete(url);
  }
}
