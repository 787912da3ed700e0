/**
 * Answers to GET requests, kept until the read models change. Every committed change to a read
 * model moves a checkpoint, which sends NOTIFY `mailtally_read_models` (migration 0004); each
 * notification starts a new generation, and only entries of the current generation are served.
 * A request stores its answer only if no notification arrived while it ran, so an answer read
 * from an older snapshot is never kept. `ttlMs` bounds an entry's age in case notifications are
 * lost (a dropped LISTEN connection is re-established and counted as a change).
 */
export const READ_MODELS_CHANNEL = 'mailtally_read_models';

export class ResponseCache {
  #generation = 0;
  readonly #entries = new Map<string, { body: string; generation: number; expires: number }>();
  /** Answers being computed: identical requests arriving meanwhile wait for the same one. */
  readonly #inFlight = new Map<string, { generation: number; body: Promise<string> }>();

  constructor(
    readonly maxEntries: number,
    readonly ttlMs: number,
    private readonly maxBodyBytes = 256 * 1024,
    private readonly now: () => number = () => Date.now(),
  ) {}

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
  }

  /** Taken before reading, handed back to `set`. */
  get generation(): number {
    return this.#generation;
  }

  get(key: string): string | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (e.generation !== this.#generation || e.expires <= this.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.body;
  }

  set(key: string, body: string, generation: number): void {
    if (!this.enabled || generation !== this.#generation || body.length > this.maxBodyBytes) return;
    if (this.#entries.size >= this.maxEntries) {
      // Oldest first: Map keeps insertion order.
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(key, { body, generation, expires: this.now() + this.ttlMs });
  }
}
