/**
 * The least time between the starts of two live batches (`PROJECTOR_MIN_INTERVAL_MS`). A
 * projector that keeps up folds whatever arrived since its last batch, often a handful of
 * events, and a write costs the database about as much for a few events as for dozens: spacing
 * the batches out trades a little freshness for much less database work at low rates. Only a
 * partial batch (the projector caught up) spaces out the next; full batches (a backlog) follow
 * one another at once. 0, the default: no spacing.
 */
export class BatchPace {
  #notBefore = 0;
  #interrupted = false;
  #timer: NodeJS.Timeout | null = null;
  #release: (() => void) | null = null;

  constructor(
    readonly minIntervalMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Resolves when the next batch may start, with the time it is (this pace's clock): at once
   * unless the last batch was partial and began less than the interval ago.
   */
  async wait(): Promise<number> {
    const ms = this.#notBefore - this.now();
    if (ms > 0 && !this.#interrupted) {
      await new Promise<void>((resolve) => {
        this.#release = resolve;
        this.#timer = setTimeout(resolve, ms);
      });
      this.#timer = null;
      this.#release = null;
    }
    return this.now();
  }

  /** A batch began at `startedAt` (this pace's clock); `full`: it took as many events as a batch holds. */
  started(startedAt: number, full: boolean): void {
    this.#notBefore = full || this.minIntervalMs === 0 ? 0 : startedAt + this.minIntervalMs;
  }

  /** Ends a wait at once, and every later one (the projector stops; it may be between two turns, about to wait). */
  interrupt(): void {
    this.#interrupted = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#release?.();
  }
}
