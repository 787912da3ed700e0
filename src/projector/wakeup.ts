import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';

/** The log's append notification (see the 0001 migration), with polling as the fallback. */
export const APPEND_CHANNEL = 'mailtally_events';

export class Wakeup {
  #pending = false;
  #waiter: (() => void) | null = null;
  #unlisten: (() => Promise<void>) | null = null;
  #stopped = false;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    try {
      this.#unlisten = await this.db.listen(APPEND_CHANNEL, () => this.signal());
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'cannot LISTEN for appends; polling until it can');
      void this.#retryListen();
    }
  }

  async #retryListen(): Promise<void> {
    while (!this.#stopped && this.#unlisten === null) {
      await sleep(2000);
      if (this.#stopped) return;
      try {
        this.#unlisten = await this.db.listen(APPEND_CHANNEL, () => this.signal());
        this.signal();
      } catch {
        // still down; keep polling
      }
    }
  }

  signal(): void {
    this.#pending = true;
    this.#waiter?.();
  }

  /** Resolves on the next signal (or one that came since the last wait), or after `ms`. */
  async wait(ms: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#waiter = done;
    });
    this.#waiter = null;
    this.#pending = false;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.signal();
    await this.#unlisten?.();
    this.#unlisten = null;
  }
}
