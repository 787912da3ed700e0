/**
 * Per-key request budget: a token bucket of `burst` tokens refilled at `perSecond`. Over budget,
 * the caller answers 429 with Retry-After. `perSecond` 0 turns the limit off.
 */
export class RateLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
    private readonly maxKeys = 100_000,
  ) {}

  /** 0 when the request may go ahead, else the seconds to wait. */
  take(key: string): number {
    if (this.perSecond <= 0) return 0;
    const now = this.now();
    let b = this.#buckets.get(key);
    if (b === undefined) {
      if (this.#buckets.size >= this.maxKeys) this.#buckets.clear();
      b = { tokens: this.burst, at: now };
      this.#buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return (1 - b.tokens) / this.perSecond;
  }
}

/**
 * Failed Basic-auth attempts per client address: past `maxFailures` in `windowMs` the address
 * gets 429 until the window has passed, so secrets cannot be guessed at speed.
 */
export class AuthFailureLimiter {
  readonly #failures = new Map<string, { count: number; since: number }>();

  constructor(
    readonly maxFailures: number,
    readonly windowMs: number,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Seconds until the address may try again, or 0. */
  blockedFor(address: string): number {
    const f = this.#failures.get(address);
    if (f === undefined) return 0;
    const elapsed = this.now() - f.since;
    if (elapsed >= this.windowMs) {
      this.#failures.delete(address);
      return 0;
    }
    return f.count >= this.maxFailures ? (this.windowMs - elapsed) / 1000 : 0;
  }

  fail(address: string): void {
    const now = this.now();
    const f = this.#failures.get(address);
    if (f === undefined || now - f.since >= this.windowMs) {
      if (this.#failures.size >= 100_000) this.#failures.clear();
      this.#failures.set(address, { count: 1, since: now });
    } else f.count += 1;
  }
}
