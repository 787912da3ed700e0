import { describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { HttpOutcome } from '../../../src/webhooks/http-delivery.js';
import { Lane } from '../../../src/webhooks/lane.js';
import type { ClaimedDelivery } from '../../../src/webhooks/outbox.js';
import { quietLogger } from '../../support/harness.js';

/**
 * The first lane's pace for the fan-out (`room`): it says "wait" once the queued first attempts,
 * each URL's counted up to its slots, reach half the lane's concurrency, and "go" again when
 * requests finishing bring them below that, or after the longest wait it was given. The lane is
 * driven as the fan-out drives it (reserve, then start or enqueue) and never started, so no
 * database is touched; requests finish when the test says.
 */

const OK: HttpOutcome = { ok: true, statusCode: 200, latencyMs: 1, errorClass: null, snippet: null, retryAfterMs: null };

function row(urlId: number, n: number): ClaimedDelivery {
  return {
    id: 0n,
    direct: BigInt(n),
    apiKeyId: 1n,
    urlId: BigInt(urlId),
    webhookId: `msg_${n}`,
    body: '{}',
    eventCount: 1,
    attempts: 0,
    firstFailedAt: null,
    createdAt: new Date(),
    claim: '',
    target: { url: `http://127.0.0.1/${urlId}`, secret: 's', version: 1, status: 'alive', isBackup: false, eventType: 'open' },
  };
}

/** A lane whose requests stay in flight until `finish(url)` answers the oldest one of that URL. */
function lane(concurrency: number, perUrl: number) {
  const pending = new Map<number, (() => void)[]>();
  const handedOff: ClaimedDelivery[] = [];
  const deliver = (r: ClaimedDelivery) =>
    new Promise<HttpOutcome>((resolve) => {
      const url = Number(r.urlId);
      pending.set(url, [...(pending.get(url) ?? []), () => resolve(OK)]);
    });
  const l = new Lane(
    {} as Db,
    { retry: false, concurrency, perUrl, adaptive: false, pollMs: 1000, leaseMs: 60_000, queueMs: 60_000 },
    deliver,
    quietLogger(),
    (r) => handedOff.push(r),
  );
  let n = 0;
  /** What the fan-out does with one event for `url` after its commit. */
  const offer = (url: number): string => {
    const kind = l.reserve(BigInt(url));
    if (kind === 'reserved') l.startReserved(row(url, n++));
    else if (kind === 'queued') l.enqueue(row(url, n++), Date.now());
    return kind;
  };
  const finish = async (url: number): Promise<void> => {
    pending.get(url)?.shift()?.();
    // The lane starts the next queued row once the outcome's handlers have run.
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { lane: l, offer, finish, handedOff, inFlight: (url: number) => pending.get(url)?.length ?? 0 };
}

const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

describe('the first lane paces the fan-out', () => {
  it('has room until the queued rows, counted up to each URL’s slots, reach half its concurrency', async () => {
    // Concurrency 8: the mark is 4. Two URLs of 2 slots each: 4 requests in flight, nothing queued.
    const t = lane(8, 2);
    for (let i = 0; i < 2; i++) {
      expect(t.offer(1)).toBe('reserved');
      expect(t.offer(2)).toBe('reserved');
    }
    expect(await settled(t.lane.room(60_000))).toBe(true);
    // Three queued behind URL 1 count as 2 (its slots): still room.
    for (let i = 0; i < 3; i++) expect(t.offer(1)).toBe('queued');
    expect(await settled(t.lane.room(60_000))).toBe(true);
    // One behind URL 2 as well: 2 + 1 = 3; a second one: 4, the mark.
    t.offer(2);
    expect(await settled(t.lane.room(60_000))).toBe(true);
    t.offer(2);
    expect(await settled(t.lane.room(60_000))).toBe(false);
  });

  it('lets the fan-out go on when a finished request starts a queued row and the count falls below the mark', async () => {
    const t = lane(8, 2);
    for (let i = 0; i < 4; i++) t.offer(1);
    for (let i = 0; i < 4; i++) t.offer(2);
    expect(t.lane.queued).toBe(4);
    // 2 in flight and 2 queued at each URL: 4 counted.
    const wait = t.lane.room(60_000);
    expect(await settled(wait)).toBe(false);
    await t.finish(1);
    expect(t.inFlight(1)).toBe(2);
    expect(await settled(wait)).toBe(true);
    expect(await settled(t.lane.room(60_000))).toBe(true);
  });

  it('does not count a URL that answers slowly beyond its slots, however long its queue', async () => {
    // Concurrency 16 (mark 8), 2 slots per URL: URL 9 never answers and its queue grows to 20;
    // it weighs 2, so the fan-out keeps going for the others.
    const t = lane(16, 2);
    for (let i = 0; i < 22; i++) t.offer(9);
    expect(await settled(t.lane.room(60_000))).toBe(true);
    for (let i = 0; i < 4; i++) t.offer(1);
    expect(await settled(t.lane.room(60_000))).toBe(true);
  });

  it('never holds the fan-out longer than the wait it was given', async () => {
    const t = lane(2, 1);
    for (let i = 0; i < 4; i++) {
      t.offer(1);
      t.offer(2);
    }
    const started = performance.now();
    expect(await t.lane.room(50)).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    // It says whether it waited: with room, it does not.
    const roomy = lane(2, 1);
    expect(await roomy.lane.room(50)).toBe(false);
  });

  it('says how many more first attempts it could start or queue, so the fan-out reads no more than that', async () => {
    // Concurrency 2: 2 slots and 2 × 16 queue places over the lane.
    const t = lane(2, 1);
    expect(t.lane.capacity()).toBe(34);
    t.offer(1);
    expect(t.lane.capacity()).toBe(33);
    t.offer(2);
    t.offer(2);
    expect(t.lane.capacity()).toBe(31);
    await t.finish(2);
    // The queued row took the freed slot: one queue place back, the slot taken again.
    expect(t.lane.capacity()).toBe(32);
    const stopping = t.lane.stop();
    expect(t.lane.capacity()).toBe(0);
    await t.finish(1);
    await t.finish(2);
    await stopping;
  });

  it('has room again once stopped (its queues are handed to the outbox)', async () => {
    const t = lane(2, 1);
    for (let i = 0; i < 3; i++) t.offer(1);
    const wait = t.lane.room(60_000);
    expect(await settled(wait)).toBe(false);
    const stopping = t.lane.stop();
    expect(await settled(wait)).toBe(true);
    expect(t.handedOff).toHaveLength(2);
    await t.finish(1);
    await stopping;
  });
});
