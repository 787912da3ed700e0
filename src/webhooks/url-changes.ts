/**
 * When each callback URL last changed (its address, status, version, secret, event type or backup
 * flag, or deleted), as this process heard it: NOTIFY on CALLBACK_URLS_CHANNEL with the URL's id
 * (a trigger, migration 0009), or
 * `null` after the LISTEN connection was lost, when any of them may have. A first attempt the
 * fan-out took from the log carries the URL as it was then; made at or before the URL's change,
 * it is not sent as it is (dispatcher.ts hands it to the outbox, whose claim reads the URL anew).
 */
export const CALLBACK_URLS_CHANNEL = 'mailtally_callback_urls';

export class UrlChanges {
  /** URL id → local clock (ms) when its change was heard. */
  readonly #at = new Map<string, number>();
  /** When every URL may have changed (a lost LISTEN connection). */
  #all = 0;

  /**
   * @param keepMs how long a change matters: no first attempt waits longer than this (the lane's
   *   queue time, and then some) to be sent, so older changes are forgotten.
   */
  constructor(private readonly keepMs: number) {}

  /** A notification: the URL's id, or null for "any of them". */
  heard(urlId: string | null, now: number = Date.now()): void {
    if (urlId === null) this.#all = now;
    else this.#at.set(urlId, now);
    if (this.#at.size > 1000) for (const [id, at] of this.#at) if (at < now - this.keepMs) this.#at.delete(id);
  }

  /** Whether the URL changed at or after `madeAt` (a first attempt's local creation time). */
  since(urlId: bigint, madeAt: number): boolean {
    return madeAt <= this.#all || madeAt <= (this.#at.get(String(urlId)) ?? -1);
  }
}
