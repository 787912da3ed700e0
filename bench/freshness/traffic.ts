import { headers } from '@nats-io/transport-node';
import { generateEvents } from '../support/generate.js';

export interface Pregenerated {
  subject: string;
  data: Uint8Array;
  headers: ReturnType<typeof headers>;
}

/** The background traffic, generated and encoded up front (its cost is not the service's). */
export function pregenerate(count: number, subjectPrefix: string): Pregenerated[] {
  const out: Pregenerated[] = [];
  const encoder = new TextEncoder();
  for (const g of generateEvents({ count, duplicateRate: 0 })) {
    const h = headers();
    h.set('Nats-Msg-Id', g.eventId);
    out.push({ subject: `${subjectPrefix}.${g.apiKeyId}.${g.event}`, data: encoder.encode(g.text), headers: h });
  }
  return out;
}

export function track(set: Set<Promise<unknown>>, p: Promise<unknown>): void {
  const tracked: Promise<unknown> = p.then(
    (): boolean => set.delete(tracked),
    (): boolean => set.delete(tracked),
  );
  set.add(tracked);
}
