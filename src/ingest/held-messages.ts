import type { JsMsg } from '@nats-io/jetstream';
import { streamSequence } from './nats-message.js';

/**
 * The NATS messages one ingest holds (received, not yet acked, nak'ed or termed), by stream
 * sequence. A message still held when JetStream redelivers it (its write took longer than
 * ack_wait) arrives again as a copy, which is not taken a second time; `touch()` tells the
 * server the held ones are still being worked on, so it does not redeliver them at all.
 * At most `limit` are held: past it, ingest stops pulling until it is down to `resumeAt`.
 */
export class HeldMessages {
  readonly #bySeq = new Map<number, JsMsg>();
  #waiter: (() => void) | null = null;

  constructor(
    readonly limit: number,
    readonly resumeAt: number,
  ) {}

  get size(): number {
    return this.#bySeq.size;
  }

  get full(): boolean {
    return this.#bySeq.size >= this.limit;
  }

  /** Holds the message, or answers false for a copy of one already held. */
  take(m: JsMsg): boolean {
    const seq = streamSequence(m);
    if (this.#bySeq.has(seq)) return false;
    this.#bySeq.set(seq, m);
    return true;
  }

  /** Lets go of messages that were acked, nak'ed or termed (or never taken). */
  release(messages: Iterable<JsMsg>): void {
    for (const m of messages) {
      const seq = streamSequence(m);
      if (this.#bySeq.get(seq) === m) this.#bySeq.delete(seq);
    }
    if (this.#waiter !== null && this.#bySeq.size < this.resumeAt) this.wake();
  }

  /** Forgets every message: the consumer they came from is gone, and its sequences with it. */
  clear(): void {
    this.#bySeq.clear();
    this.wake();
  }

  /** Tells JetStream that every held message is still in hand (resets its ack_wait). */
  touch(): void {
    for (const m of this.#bySeq.values()) m.working();
  }

  /** Resolves once fewer than `resumeAt` are held (or `wake()` is called). */
  async room(): Promise<void> {
    if (this.#bySeq.size < this.resumeAt) return;
    await new Promise<void>((resolve) => {
      this.#waiter = resolve;
    });
  }

  wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }
}
