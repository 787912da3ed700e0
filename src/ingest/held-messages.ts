import type { JsMsg } from '@nats-io/jetstream';
import { streamSequence } from './nats-message.js';

/**
 * The NATS messages one ingest holds (received, not yet acked, nak'ed or termed), by stream
 * sequence. A message still held when JetStream redelivers it (its write took longer than
 * ack_wait) arrives again as a copy, which is not taken a second time; `touch()` tells the
 * server the held ones are still being worked on, so it does not redeliver them at all.
 * At most `limit` are held, and at most `byteLimit` bytes of them (the message that crosses it is
 * the last taken): past either, ingest stops pulling until it is down to `resumeAt` messages and
 * half the bytes.
 */
export class HeldMessages {
  readonly #bySeq = new Map<number, JsMsg>();
  #bytes = 0;
  #waiter: (() => void) | null = null;

  constructor(
    readonly limit: number,
    readonly resumeAt: number,
    readonly byteLimit = Number.POSITIVE_INFINITY,
  ) {}

  get size(): number {
    return this.#bySeq.size;
  }

  /** Bytes of the held messages' data. */
  get bytes(): number {
    return this.#bytes;
  }

  get full(): boolean {
    return this.#bySeq.size >= this.limit || this.#bytes >= this.byteLimit;
  }

  #roomy(): boolean {
    return this.#bySeq.size < this.resumeAt && this.#bytes < this.byteLimit / 2;
  }

  /** Holds the message, or answers false for a copy of one already held. */
  take(m: JsMsg): boolean {
    const seq = streamSequence(m);
    if (this.#bySeq.has(seq)) return false;
    this.#bySeq.set(seq, m);
    this.#bytes += m.data.length;
    return true;
  }

  /** Lets go of messages that were acked, nak'ed or termed (or never taken). */
  release(messages: Iterable<JsMsg>): void {
    for (const m of messages) {
      const seq = streamSequence(m);
      if (this.#bySeq.get(seq) === m) {
        this.#bySeq.delete(seq);
        this.#bytes -= m.data.length;
      }
    }
    if (this.#waiter !== null && this.#roomy()) this.wake();
  }

  /** Forgets every message: the consumer they came from is gone, and its sequences with it. */
  clear(): void {
    this.#bySeq.clear();
    this.#bytes = 0;
    this.wake();
  }

  /** Tells JetStream that every held message is still in hand (resets its ack_wait). */
  touch(): void {
    for (const m of this.#bySeq.values()) m.working();
  }

  /** Resolves once fewer than `resumeAt` are held, of fewer than half `byteLimit` bytes (or `wake()` is called). */
  async room(): Promise<void> {
    if (this.#roomy()) return;
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
