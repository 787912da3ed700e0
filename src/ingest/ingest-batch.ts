import type { JsMsg } from '@nats-io/jetstream';
import type { NewDeadLetter } from '../db/schema.js';
import { type LogEventRow, decodeEventBytes } from '../events/decode.js';
import { describeError } from '../db/errors.js';
import { natsDeadLetter, streamSequence } from './nats-message.js';

/**
 * NATS messages gathered for one write, each decoded as it arrives (so decoding interleaves
 * with the database round trips of the batches before it): the rows to append with their
 * messages, and the poison messages with their dead letters. A message whose tenant is not
 * known yet waits in `unresolved` until the writer has reloaded the tenants.
 */
export class IngestBatch {
  readonly rows: LogEventRow[] = [];
  readonly rowMessages: JsMsg[] = [];
  readonly letters: NewDeadLetter[] = [];
  readonly poison: JsMsg[] = [];
  readonly unresolved: { m: JsMsg; apiKeyId: string; event: string }[] = [];
  /** Bytes of the messages' data. */
  bytes = 0;

  get size(): number {
    return this.rows.length + this.poison.length + this.unresolved.length;
  }

  /** Every message of the batch, e.g. to nak them all. */
  messages(): JsMsg[] {
    return [...this.rowMessages, ...this.poison, ...this.unresolved.map((u) => u.m)];
  }

  /** Decodes a message of a known tenant into a row, or dead-letters it with the reason. */
  decode(m: JsMsg, apiKeyId: string, event: string): void {
    this.bytes += m.data.length;
    let reason: string;
    try {
      const decoded = decodeEventBytes(m.data, { apiKeyId, subjectEvent: event, natsSeq: streamSequence(m) });
      if (decoded.ok) {
        this.rows.push(decoded.row);
        this.rowMessages.push(m);
        return;
      }
      reason = decoded.reason;
    } catch (err) {
      reason = `could not be decoded: ${describeError(err)}`;
    }
    this.#refuse(m, reason, apiKeyId);
  }

  /** Dead-letters a message with the reason. */
  reject(m: JsMsg, reason: string, apiKeyId: string | null): void {
    this.bytes += m.data.length;
    this.#refuse(m, reason, apiKeyId);
  }

  /** Sets a message aside until the writer has reloaded the tenants. */
  defer(m: JsMsg, apiKeyId: string, event: string): void {
    this.bytes += m.data.length;
    this.unresolved.push({ m, apiKeyId, event });
  }

  /** Decodes the deferred messages whose tenant is now known, dead-letters the others. */
  resolve(knows: (apiKeyId: string) => boolean): void {
    for (const { m, apiKeyId, event } of this.unresolved.splice(0)) {
      this.bytes -= m.data.length;
      if (knows(apiKeyId)) this.decode(m, apiKeyId, event);
      else this.reject(m, `unknown APIKeyID ${apiKeyId} in subject ${m.subject}`, apiKeyId);
    }
  }

  #refuse(m: JsMsg, reason: string, apiKeyId: string | null): void {
    this.letters.push(natsDeadLetter(m, reason, apiKeyId));
    this.poison.push(m);
  }

  /** Appends another batch's messages (to write several queued batches in one transaction). */
  absorb(other: IngestBatch): void {
    for (const r of other.rows) this.rows.push(r);
    for (const m of other.rowMessages) this.rowMessages.push(m);
    for (const l of other.letters) this.letters.push(l);
    for (const m of other.poison) this.poison.push(m);
    for (const u of other.unresolved) this.unresolved.push(u);
    this.bytes += other.bytes;
  }
}
