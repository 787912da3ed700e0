import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { OutgoingMessage } from './jetstream.js';
import { sleep } from './processes.js';

/**
 * A producer that keeps going through NATS outages: messages are published at a steady rate
 * with a window of unacknowledged publishes, and one whose publish fails (server gone, ack
 * timeout) is published again until the stream acknowledges it — as a real producer does. A
 * message without Nats-Msg-Id may so be stored twice; the log must keep it once.
 */

export interface PublishReport {
  published: number;
  /** Publishes that failed and were tried again. */
  retries: number;
  /** Acks the stream marked duplicate (Nats-Msg-Id seen in its window). */
  duplicateAcks: number;
  ms: number;
}

export interface PaceOptions {
  ratePerSecond: number;
  /** Unacknowledged publishes at most (default 256). */
  window?: number;
  timeoutMs?: number;
  /** Called before message `index` is published: a promise holds the producer back until it settles. */
  gate?: (index: number) => Promise<void> | null;
  /** Messages handed to the client so far, kept up to date for the caller. */
  progress?: { started: number };
}

export async function publishPaced(url: string, messages: readonly OutgoingMessage[], opts: PaceOptions): Promise<PublishReport> {
  const nc = await connect({ servers: [url], name: 'mailtally-faults-producer', maxReconnectAttempts: -1, reconnectTimeWait: 250, waitOnFirstConnect: true });
  const js = jetstream(nc, { timeout: opts.timeoutMs ?? 3000 });
  const window = opts.window ?? 256;
  const report: PublishReport = { published: 0, retries: 0, duplicateAcks: 0, ms: 0 };
  const started = Date.now();
  const inFlight = new Set<Promise<void>>();

  const publishOne = async (m: OutgoingMessage): Promise<void> => {
    for (;;) {
      try {
        const ack = await js.publish(m.subject, m.body, m.msgId !== undefined ? { msgID: m.msgId } : {});
        if (ack.duplicate) report.duplicateAcks++;
        report.published++;
        return;
      } catch {
        report.retries++;
        await sleep(200);
      }
    }
  };

  try {
    const interval = 1000 / opts.ratePerSecond;
    let due = started;
    for (let i = 0; i < messages.length; i++) {
      const held = opts.gate?.(i);
      if (held !== null && held !== undefined) await held;
      // Pace: one message per interval, with no burst to make up for time spent held back.
      due = Math.max(due + interval, Date.now() - 50);
      const wait = due - Date.now();
      if (wait > 5) await sleep(wait);
      while (inFlight.size >= window) await Promise.race(inFlight);
      if (opts.progress !== undefined) opts.progress.started = i + 1;
      const job = publishOne(messages[i] as OutgoingMessage).finally(() => inFlight.delete(job));
      inFlight.add(job);
    }
    await Promise.all(inFlight);
  } finally {
    await nc.close().catch(() => {});
  }
  report.ms = Date.now() - started;
  return report;
}
