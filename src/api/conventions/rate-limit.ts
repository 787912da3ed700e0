import ipaddr from 'ipaddr.js';

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
 * Failed Basic-auth attempts per client: past `maxFailures` in `windowMs` the client gets 429
 * until the window has passed, so secrets cannot be guessed at speed. A client is an IPv4
 * address or an IPv6 /64 (one host is commonly given a whole /64, so counting single IPv6
 * addresses would let it rotate past the limit). At `maxClients`, expired records go first,
 * then the oldest: a flood of new addresses cannot wipe out every record at once.
 */
export class AuthFailureLimiter {
  readonly #failures = new Map<string, { count: number; since: number }>();
  /** Checks running per client: how many of each credentials (each distinct credentials counts once). */
  readonly #running = new Map<string, Map<string, number>>();

  constructor(
    readonly maxFailures: number,
    readonly windowMs: number,
    private readonly now: () => number = () => Date.now(),
    private readonly maxClients = 100_000,
  ) {}

  /** Seconds until the address may try again, or 0. Checks still running count as failures. */
  blockedFor(address: string): number {
    const key = clientKey(address);
    const running = this.#running.get(key)?.size ?? 0;
    const f = this.#failures.get(key);
    const elapsed = f !== undefined ? this.now() - f.since : this.windowMs;
    if (f !== undefined && elapsed >= this.windowMs) this.#failures.delete(key);
    const count = (elapsed < this.windowMs ? (f?.count ?? 0) : 0) + running;
    if (count < this.maxFailures) return 0;
    // Blocked by checks still running alone: they end within a second or two.
    return elapsed < this.windowMs ? (this.windowMs - elapsed) / 1000 : 1;
  }

  /** A check of `credentials` (a key naming them, not the secret) starts for the address. */
  begin(address: string, credentials: string): void {
    const key = clientKey(address);
    let running = this.#running.get(key);
    if (running === undefined) this.#running.set(key, (running = new Map()));
    running.set(credentials, (running.get(credentials) ?? 0) + 1);
  }

  end(address: string, credentials: string): void {
    const key = clientKey(address);
    const running = this.#running.get(key);
    const n = running?.get(credentials);
    if (running === undefined || n === undefined) return;
    if (n > 1) running.set(credentials, n - 1);
    else if (running.delete(credentials) && running.size === 0) this.#running.delete(key);
  }

  fail(address: string): void {
    const key = clientKey(address);
    const now = this.now();
    const f = this.#failures.get(key);
    if (f !== undefined && now - f.since < this.windowMs) {
      f.count += 1;
      return;
    }
    this.#failures.delete(key);
    if (this.#failures.size >= this.maxClients) this.#evict(now);
    this.#failures.set(key, { count: 1, since: now });
  }

  /** Records kept now (tests). */
  get size(): number {
    return this.#failures.size;
  }

  /** Drops expired records, then the oldest ones (a Map iterates in insertion order), to below 90 % of the cap. */
  #evict(now: number): void {
    for (const [key, f] of this.#failures) if (now - f.since >= this.windowMs) this.#failures.delete(key);
    const target = Math.floor(this.maxClients * 0.9);
    for (const key of this.#failures.keys()) {
      if (this.#failures.size <= target) break;
      this.#failures.delete(key);
    }
  }
}

/**
 * The unit failed logins are counted under: an IPv4 address (IPv4-mapped IPv6 included) as it
 * is, an IPv6 address as its /64 prefix; anything else as given.
 */
export function clientKey(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const addr = ipaddr.process(address); // an IPv4-mapped IPv6 address becomes the IPv4 one
  if (addr.kind() === 'ipv4') return addr.toString();
  return `${(addr as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}
