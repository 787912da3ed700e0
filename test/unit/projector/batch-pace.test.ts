import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BatchPace } from '../../../src/projector/batch-pace.js';

describe('BatchPace', () => {
  let now = 0;
  beforeEach(() => {
    vi.useFakeTimers();
    now = 1000;
  });
  afterEach(() => vi.useRealTimers());

  /** Whether `wait()` has resolved after `ms` more of the (fake) clock. */
  async function settledAfter(p: Promise<number>, ms: number): Promise<boolean> {
    let done = false;
    void p.then(() => (done = true));
    now += ms;
    await vi.advanceTimersByTimeAsync(ms);
    return done;
  }

  it('after a partial batch, holds the next until the interval from its start has passed', async () => {
    const pace = new BatchPace(300, () => now);
    pace.started(1000, false);
    now = 1100;
    const next = pace.wait();
    expect(await settledAfter(next, 150)).toBe(false);
    expect(await settledAfter(next, 60)).toBe(true);
    expect(await next).toBe(1310);
  });

  it('lets a batch follow a full one, or any batch with no interval, at once', async () => {
    const full = new BatchPace(300, () => now);
    full.started(1000, true);
    expect(await settledAfter(full.wait(), 0)).toBe(true);
    const none = new BatchPace(0, () => now);
    none.started(1000, false);
    expect(await settledAfter(none.wait(), 0)).toBe(true);
  });

  it('does not hold a batch that comes after the interval anyway', async () => {
    const pace = new BatchPace(300, () => now);
    pace.started(1000, false);
    now = 1400;
    expect(await settledAfter(pace.wait(), 0)).toBe(true);
  });

  it('ends a wait at once when interrupted (the projector stops)', async () => {
    const pace = new BatchPace(10_000, () => now);
    pace.started(1000, false);
    const next = pace.wait();
    pace.interrupt();
    expect(await settledAfter(next, 0)).toBe(true);
  });

  it('does not wait after an interrupt that came before the wait (a stop between two turns of the loop)', async () => {
    const pace = new BatchPace(10_000, () => now);
    pace.started(1000, false);
    pace.interrupt();
    expect(await settledAfter(pace.wait(), 0)).toBe(true);
  });
});
