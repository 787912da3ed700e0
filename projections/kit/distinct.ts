import type { MessageFacts } from './message-facts.js';

/**
 * The distinct-message counts shared by contact, list-recipient and recipient-ESP statistics,
 * in the column order of `DISTINCT_SUMS`.
 */
export const DISTINCT_SUMS = [
  'processed',
  'queued',
  'delivered',
  'deferred',
  'bounced',
  'hard_bounced',
  'soft_bounced',
  'blocked',
  'opened',
  'clicked',
  'spam',
  'unsub',
] as const;

/** 1 when a message has at least one event of a kind, else 0. */
export function has(n: number): number {
  return n > 0 ? 1 : 0;
}

export function distinctCounts(f: MessageFacts): number[] {
  const c = f.count;
  return [
    f.messageTime !== null ? 1 : 0,
    has(c.queued),
    has(c.sent),
    has(c.deferred),
    has(c.bounced),
    has(c.hardBounced),
    has(c.softBounced),
    has(c.blocked),
    has(c.opened),
    has(c.clicked),
    has(c.spam),
    has(c.unsub),
  ];
}

/** `distinctCounts` followed by `messages` 1 and `named` 1: the row a message counts in (contact and list-recipient statistics). */
export function countedHere(f: MessageFacts): number[] {
  const counts = distinctCounts(f);
  counts.push(1, 1);
  return counts;
}
