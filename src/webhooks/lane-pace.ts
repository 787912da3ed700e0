/**
 * The first lane's pace for the fan-out: how many first attempts are queued in the lane (each
 * URL's counted up to its slots), and the fan-out waiting for them to go down (`room`).
 */
export class LanePace {
  /**
   * Queued first attempts counted for the fan-out's pace: each URL's queue up to `perUrl` rows,
   * so a URL that answers slowly (its queue always full) weighs no more than its slots.
   */
  backlog = 0;
  /** The fan-out waiting for the backlog to fall below the mark. */
  #roomWaiters: (() => void)[] = [];

  constructor(private readonly concurrency: number) {}

  /**
   * Resolves once the lane can start what the fan-out would read next: at once, unless the
   * queued first attempts (each URL's counted up to its slots) reach half the lane's concurrency;
   * then when they fall below that, or after `maxWaitMs` at most (so URLs that answer slowly,
   * however many, only slow the fan-out down, never stop it). Without this pace the fan-out,
   * reading a backlog faster than it can be sent, fills every URL's queue and writes the rest
   * into the outbox, which costs Postgres a row, a claim and a delete for each. True if it waited.
   */
  room(maxWaitMs: number, stopped: boolean): Promise<boolean> {
    if (this.backlog < this.#backlogMark || stopped) return Promise.resolve(false);
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

  /** Wakes the fan-out if it waits and the backlog is below the mark. */
  wakeIfRoom(): void {
    if (this.#roomWaiters.length > 0 && this.backlog < this.#backlogMark) this.#wakeRoomWaiters();
  }

  /** The lane stopped: nothing is queued any more, and the fan-out waits no longer. */
  clear(): void {
    this.backlog = 0;
    this.#wakeRoomWaiters();
  }

  get #backlogMark(): number {
    return Math.max(1, Math.floor(this.concurrency / 2));
  }

  #wakeRoomWaiters(): void {
    const waiters = this.#roomWaiters;
    this.#roomWaiters = [];
    for (const w of waiters) w();
  }
}
