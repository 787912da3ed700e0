import type { JsMsg } from '@nats-io/jetstream';
import type { NewDeadLetter } from '../db/schema.js';

/**
 * The stream sequence of a JetStream message, read straight from its reply subject
 * (`$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.…`, or the longer form with domain and account
 * hash first), without the client's full parse of the delivery info; the client's when unsure.
 */
export function streamSequence(m: JsMsg): number {
  // JsMsg's implementation exposes the reply subject; its interface does not.
  const reply = (m as JsMsg & { readonly reply?: unknown }).reply;
  if (typeof reply !== 'string' || !reply.startsWith('$JS.ACK.')) return m.seq;
  let dots = 0;
  for (let at = reply.indexOf('.'); at >= 0; at = reply.indexOf('.', at + 1)) {
    if (dots < DOTS.length) DOTS[dots] = at;
    dots++;
  }
  // 9 tokens: the stream sequence is the 6th; 11 or more: the 8th.
  const token = dots === 8 ? 5 : dots >= 10 ? 7 : -1;
  if (token < 0) return m.seq;
  const start = (DOTS[token - 1] as number) + 1;
  const end = DOTS[token] as number;
  let seq = 0;
  for (let i = start; i < end; i++) {
    const c = reply.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return m.seq;
    seq = seq * 10 + c;
  }
  return end > start && Number.isSafeInteger(seq) ? seq : m.seq;
}

/** Where the dots of the reply subject being read are (a scratch array: this runs once per message). */
const DOTS = new Int32Array(12);

/** A dead letter for a NATS message, keyed so that a redelivery of it is stored once. */
export function natsDeadLetter(m: JsMsg, reason: string, apiKeyId: string | null): NewDeadLetter {
  return {
    source: 'nats',
    subject: m.subject,
    nats_seq: m.seq,
    message_key: `${m.info.stream}/${m.seq}/${m.info.timestampNanos}`,
    api_key_id: apiKeyId,
    reason,
    raw: Buffer.from(m.data),
  };
}
