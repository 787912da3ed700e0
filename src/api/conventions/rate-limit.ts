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

  constructor(
    readonly maxFailures: number,
    readonly windowMs: number,
    private readonly now: () => number = () => Date.now(),
    private readonly maxClients = 100_000,
  ) {}

  /** Seconds until the address may try again, or 0. */
  blockedFor(address: string): number {
    const key = clientKey(address);
    const f = this.#failures.get(key);
    if (f === undefined) return 0;
    const elapsed = this.now() - f.since;
    if (elapsed >= this.windowMs) {
      this.#failures.delete(key);
      return 0;
    }
    return f.count >= this.maxFailures ? (this.windowMs - elapsed) / 1000 : 0;
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
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped !== null) return mapped[1] as string;
  if (!address.includes(':')) return address;
  const bare = address.split('%')[0] as string; // a zone id names an interface, not a client
  const halves = bare.toLowerCase().split('::');
  if (halves.length > 2) return address;
  const groups = (part: string | undefined) => (part === undefined || part === '' ? [] : part.split(':'));
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  // A dotted IPv4 tail stands for two groups.
  const width = (g: string[]) => g.reduce((n, x) => n + (x.includes('.') ? 2 : 1), 0);
  const missing = 8 - width(head) - width(tail);
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return address;
  const full = [...head, ...Array<string>(missing).fill('0'), ...tail];
  if (full.slice(0, 4).some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return address;
  return `${full.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
