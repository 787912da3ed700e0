import type { JetStreamClient } from '@nats-io/jetstream';
import type { GeneratedEvent } from '../support/generate.js';

export interface Preloaded {
  ms: number;
  /** Stream sequence of each published event, by generation index. */
  seqs: Float64Array;
  bytes: number;
}

/**
 * Publishes the backlog on `<prefix>.<APIKeyID>.<event>`, many in flight. No Nats-Msg-Id: the
 * stream's duplicate window would drop the generator's duplicates before ingest sees them, and
 * the database's unique index is the guard being measured.
 */
export async function preloadStream(
  js: JetStreamClient,
  subjectPrefix: string,
  events: Iterable<GeneratedEvent>,
  count: number,
  maxInFlight = 1024,
): Promise<Preloaded> {
  const seqs = new Float64Array(count);
  const started = performance.now();
  let inFlight = 0;
  let wake: (() => void) | null = null;
  let failure: unknown = null;
  let bytes = 0;
  let i = 0;
  for (const e of events) {
    if (failure !== null) break;
    while (inFlight >= maxInFlight) await new Promise<void>((resolve) => (wake = resolve));
    const index = i++;
    inFlight++;
    bytes += e.text.length;
    js.publish(`${subjectPrefix}.${e.apiKeyId}.${e.event}`, e.text).then(
      (ack) => {
        seqs[index] = ack.seq;
      },
      (err: unknown) => {
        failure ??= err;
      },
    ).finally(() => {
      inFlight--;
      const w = wake;
      wake = null;
      w?.();
    });
    if (index % 100_000 === 99_999) process.stderr.write(`  preload: ${index + 1} / ${count}\n`);
  }
  while (inFlight > 0) await new Promise<void>((resolve) => (wake = resolve));
  if (failure !== null) throw failure;
  if (i !== count) throw new Error(`preload: generated ${i} events, expected ${count}`);
  return { ms: performance.now() - started, seqs, bytes };
}
