import { generateEvents, seededRng } from '../../bench/support/generate.js';
import { deriveEventId } from '../../src/events/event-id.js';
import { parseExactJson } from '../../src/events/exact-json.js';

/**
 * The seeded producer traffic of the fault test: the bench generator's realistic stream (every
 * event type, several tenants, messages interleaved, an open now and then before its sent, ~5%
 * exact repeats of earlier events), further disordered in a sliding window, with a share of the
 * events published without an EventID (the service derives one: see src/events/event-id.ts) and
 * a share without a Nats-Msg-Id header (so the stream keeps repeats and only the log dedupes).
 * Each message knows the EventID the log must hold it under.
 */

export interface FaultMessage {
  tenant: string;
  event: string;
  subject: string;
  body: string;
  msgId?: string;
  /** `<tenant>:<EventID>` as the log must hold it. */
  key: string;
}

export interface FaultStreamOptions {
  count: number;
  seed: number;
  tenants: readonly string[];
  subjectPrefix: string;
  /** Share of events sent without their EventID (default 0.3). */
  withoutEventId?: number;
  /** Share of messages sent without a Nats-Msg-Id header (default 0.3). */
  withoutMsgId?: number;
  /** Window of the extra shuffle (default 64). */
  window?: number;
}

export function faultStream(opts: FaultStreamOptions): FaultMessage[] {
  const r = seededRng(opts.seed ^ 0x5eed);
  const noEventId = opts.withoutEventId ?? 0.3;
  const noMsgId = opts.withoutMsgId ?? 0.3;
  // Whether an original event loses its EventID is decided once, so its repeats match it.
  const stripped = new Map<string, boolean>();
  const ordered: FaultMessage[] = [];
  for (const g of generateEvents({ count: opts.count, seed: opts.seed, tenants: opts.tenants })) {
    let strip = stripped.get(g.eventId);
    if (strip === undefined) stripped.set(g.eventId, (strip = r() < noEventId));
    const body = strip ? withoutEventId(g.text, g.eventId) : g.text;
    const eventId = strip ? deriveEventId(g.apiKeyId, parseExactJson(body) as Record<string, unknown>) : g.eventId;
    ordered.push({
      tenant: g.apiKeyId,
      event: g.event,
      subject: `${opts.subjectPrefix}.${g.apiKeyId}.${g.event}`,
      body,
      ...(r() < noMsgId ? {} : { msgId: eventId }),
      key: `${g.apiKeyId}:${eventId}`,
    });
  }
  return shuffledInWindow(ordered, opts.window ?? 64, r);
}

function withoutEventId(text: string, eventId: string): string {
  const field = `,"EventID":${JSON.stringify(eventId)}`;
  if (!text.includes(field)) throw new Error(`no EventID field in ${text}`);
  return text.replace(field, '');
}

/** Each output item is drawn at random from the next `window` items of the input. */
function shuffledInWindow<T>(items: readonly T[], window: number, r: () => number): T[] {
  const out: T[] = [];
  const pool: T[] = [];
  let next = 0;
  while (out.length < items.length) {
    while (pool.length < window && next < items.length) pool.push(items[next++] as T);
    const i = Math.floor(r() * pool.length);
    out.push(pool[i] as T);
    pool[i] = pool[pool.length - 1] as T;
    pool.pop();
  }
  return out;
}
