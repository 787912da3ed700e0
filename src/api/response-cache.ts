/**
 * Answers to GET requests, kept until the read models change. Every committed change to a read
 * model moves a checkpoint, which sends NOTIFY `mailtally_read_models` (migration 0004); each
 * notification starts a new generation, and only entries of the current generation are served.
 * A request stores its answer only if no notification arrived while it ran, so an answer read
 * from an older snapshot is never kept. `ttlMs` bounds an entry's age in case notifications are
 * lost (a dropped LISTEN connection is re-established and counted as a change). Memory is bounded
 * by `maxBytes` over all answers and their keys, not only by their count: 10,000 pages of 250 KB
 * would be 2.5 GB, 10,000 keys of 15 KB URLs 150 MB.
 */
export const READ_MODELS_CHANNEL = 'mailtally_read_models';

export interface ResponseCacheOptions {
  /** Answers kept at most (0: no cache). */
  readonly maxEntries: number;
  readonly ttlMs: number;
  /** Characters of all kept answers and their keys together (at most a byte each in memory for ASCII JSON). */
  readonly maxBytes?: number;
  /** A larger answer is not kept. */
  readonly maxBodyBytes?: number;
  readonly now?: () => number;
}

export class ResponseCache {
  #generation = 0;
  #bytes = 0;
  readonly #entries = new Map<string, { body: string; size: number; generation: number; expires: number }>();
  /** Answers being computed: identical requests arriving meanwhile wait for the same one. */
  readonly #inFlight = new Map<string, { generation: number; body: Promise<string> }>();
  readonly maxEntries: number;
  readonly ttlMs: number;
  readonly maxBytes: number;
  private readonly maxBodyBytes: number;
  private readonly now: () => number;

  constructor(options: ResponseCacheOptions) {
    this.maxEntries = options.maxEntries;
    this.ttlMs = options.ttlMs;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxBodyBytes = Math.min(options.maxBodyBytes ?? 256 * 1024, this.maxBytes);
    this.now = options.now ?? (() => Date.now());
  }

  get enabled(): boolean {
    return this.maxEntries > 0;
  }

  /**
   * The kept answer for `key`, or `compute()`'s — run once for all the identical requests that
   * arrive while it runs, so a change to the read models does not send every waiting client to
   * the database at once. A failure is not kept: each waiting request gets the error.
   */
  async answer(key: string, compute: () => Promise<string>): Promise<string> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const generation = this.#generation;
    const running = this.#inFlight.get(key);
    if (running !== undefined && running.generation === generation) return running.body;
    const body = compute();
    this.#inFlight.set(key, { generation, body });
    try {
      const text = await body;
      this.set(key, text, generation);
      return text;
    } finally {
      if (this.#inFlight.get(key)?.body === body) this.#inFlight.delete(key);
    }
  }

  /** The read models changed: every entry is out of date. */
  invalidate(): void {
    this.#generation++;
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** Characters of the answers kept now. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Taken before reading, handed back to `set`. */
  get generation(): number {
    return this.#generation;
  }

  get(key: string): string | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (e.generation !== this.#generation || e.expires <= this.now()) {
      this.#delete(key);
      return undefined;
    }
    return e.body;
  }

  set(key: string, body: string, generation: number): void {
    if (!this.enabled || generation !== this.#generation || body.length > this.maxBodyBytes) return;
    this.#delete(key);
    // The key counts too: it holds the request's URL, whose unknown parameters any client may
    // make as long as the server takes.
    const size = key.length + body.length;
    // Oldest first (a Map keeps insertion order), until the new answer fits both bounds.
    while (this.#entries.size > 0 && (this.#entries.size >= this.maxEntries || this.#bytes + size > this.maxBytes)) {
      this.#delete(this.#entries.keys().next().value as string);
    }
    this.#entries.set(key, { body, size, generation, expires: this.now() + this.ttlMs });
    this.#bytes += size;
  }

  #delete(key: string): void {
    const e = this.#entries.get(key);
    if (e === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= e.size;
  }
}
