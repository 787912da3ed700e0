import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/connect.js';
import { describeError } from '../db/errors.js';
import type { Logger } from '../logger.js';

/** The log's append notification (sent by the 0001 migration's trigger). */
export const EVENTS_CHANNEL = 'mailtally_events';

/**
 * Wakes a loop on a NOTIFY channel or a local `signal()`, with polling as the fallback: `wait`
 * resolves on the next signal (or one that came since the last wait) or after a timeout.
 */
export class Wakeup {
  #pending = false;
  #waiter: (() => void) | null = null;
  #unlisten: (() => Promise<void>) | null = null;
  #stopped = false;

  constructor(
    private readonly db: Db,
    private readonly channel: string | null,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    if (this.channel === null) return;
    try {
      this.#keep(await this.db.listen(this.channel, () => this.signal()));
    } catch (err) {
      this.log.warn({ err: describeError(err), channel: this.channel }, 'cannot LISTEN; polling until it can');
      void this.#retryListen(this.channel);
    }
  }

  async #retryListen(channel: string): Promise<void> {
    while (!this.#stopped && this.#unlisten === null) {
      await sleep(2000);
      if (this.#stopped) return;
      try {
        this.#keep(await this.db.listen(channel, () => this.signal()));
        this.signal();
      } catch {
        // still down; keep polling
      }
    }
  }

  /** A LISTEN that came through after `stop()` (it waited its turn on the shared connection) is let go at once. */
  #keep(unlisten: () => Promise<void>): void {
    if (this.#stopped) void unlisten();
    else this.#unlisten = unlisten;
  }

  signal(): void {
    this.#pending = true;
    this.#waiter?.();
  }

  /** True if a signal (or a stop) ended the wait, false if the timeout did. */
  async wait(ms: number): Promise<boolean> {
    if (this.#pending || this.#stopped) {
      this.#pending = false;
      return true;
    }
    const signaled = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), ms);
      function done(signal: boolean) {
        clearTimeout(timer);
        resolve(signal);
      }
      this.#waiter = () => done(true);
    });
    this.#waiter = null;
    this.#pending = false;
    return signaled;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.signal();
    await this.#unlisten?.();
    this.#unlisten = null;
  }
}
