import { describe, expect, it } from 'vitest';
import { Backlog } from '../../../src/webhooks/backlog.js';
import type { ClaimedDelivery } from '../../../src/webhooks/outbox.js';

function row(id: number, urlId: number): ClaimedDelivery {
  return {
    id: BigInt(id),
    apiKeyId: 1n,
    urlId: BigInt(urlId),
    webhookId: `msg_${id}`,
    body: '{}',
    eventCount: 1,
    attempts: 0,
    firstFailedAt: null,
    createdAt: new Date(0),
    claim: '',
    target: { url: 'http://127.0.0.1/', secret: 's', version: 1, status: 'alive', isBackup: false, eventType: 'open' },
  };
}

describe('first-attempt backlog', () => {
  it('gives each URL at most its room, in arrival order, and forgets what it gave', () => {
    const b = new Backlog();
    b.add([row(1, 10), row(2, 10), row(3, 20), row(4, 10), row(5, 20)]);
    const room = (url: string) => (url === '10' ? 2 : 0);
    expect(b.available(100, room)).toBe(2);
    expect(b.take(100, room).map((r) => r.id)).toEqual([1n, 2n]);
    expect(b.size).toBe(3);
    expect(b.take(100, () => 5).map((r) => r.id)).toEqual([3n, 5n, 4n]);
    expect(b.size).toBe(0);
    expect(b.has('10')).toBe(false);
  });

  it('stops at the limit and serves the other URLs first next time', () => {
    const b = new Backlog();
    b.add([row(1, 10), row(2, 10), row(3, 20), row(4, 30)]);
    expect(b.take(1, () => 5).map((r) => r.id)).toEqual([1n]);
    expect(b.take(2, () => 5).map((r) => r.id)).toEqual([3n, 4n]);
    expect(b.take(5, () => 5).map((r) => r.id)).toEqual([2n]);
  });
});
