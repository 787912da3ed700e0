import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { nextRetry, parseRetryAfter, retryWindowMs } from '../../../src/webhooks/retry-policy.js';

const SCHEDULE = [5, 30, 120];

describe('nextRetry', () => {
  it('follows the schedule, one delay per failed attempt, with ±20 % jitter', () => {
    expect(nextRetry(SCHEDULE, 1, null, () => 0.5)).toEqual({ kind: 'retry', delayMs: 5000, notBeforeMs: null });
    expect(nextRetry(SCHEDULE, 2, null, () => 0)).toEqual({ kind: 'retry', delayMs: 24_000, notBeforeMs: null });
    expect(nextRetry(SCHEDULE, 3, null, () => 0.999_999)).toEqual({ kind: 'retry', delayMs: 144_000, notBeforeMs: 155_000 });
  });

  it('sends the last retry no sooner than the whole window after the first failure, whatever the jitter', () => {
    // The last retry is held to 155 s after the first failure, however the jitter moved it.
    expect(nextRetry(SCHEDULE, 3, null, () => 0)).toEqual({ kind: 'retry', delayMs: 96_000, notBeforeMs: 155_000 });
    const schedule = loadConfig({}).webhooks.retryScheduleSeconds;
    for (let run = 0; run < 1000; run++) {
      // Time since the first failure, each retry due at the later of its delay and its floor (outbox.ts).
      let failingFor = 0;
      for (let attempts = 1; ; attempts++) {
        const decision = nextRetry(schedule, attempts, null);
        if (decision.kind === 'exhausted') break;
        failingFor = Math.max(failingFor + decision.delayMs, decision.notBeforeMs ?? 0);
      }
      expect(failingFor).toBeGreaterThanOrEqual(24 * 3600 * 1000);
      expect(failingFor).toBeLessThanOrEqual(1.2 * 24 * 3600 * 1000);
    }
  });

  it('is exhausted once every scheduled retry has failed', () => {
    expect(nextRetry(SCHEDULE, 4, null)).toEqual({ kind: 'exhausted' });
    expect(nextRetry([0.05], 2, null)).toEqual({ kind: 'exhausted' });
  });

  it('honours Retry-After within [scheduled delay, max(2 × scheduled, 60 s)], at most an hour past the schedule', () => {
    const none = () => 0;
    expect(nextRetry(SCHEDULE, 1, 20_000, none)).toEqual({ kind: 'retry', delayMs: 20_000, notBeforeMs: null });
    expect(nextRetry(SCHEDULE, 1, 1000, none)).toEqual({ kind: 'retry', delayMs: 5000, notBeforeMs: null });
    for (const random of [none, () => 0.999_999]) {
      expect(nextRetry(SCHEDULE, 1, 3_600_000, random)).toEqual({ kind: 'retry', delayMs: 60_000, notBeforeMs: null });
      expect(nextRetry(SCHEDULE, 3, 3_600_000, random)).toEqual({ kind: 'retry', delayMs: 240_000, notBeforeMs: 155_000 });
      expect(nextRetry([7200], 1, 86_400_000, random)).toEqual({ kind: 'retry', delayMs: 10_800_000, notBeforeMs: 7_200_000 });
    }
  });

  it('spreads the deliveries one Retry-After turned away: up to 20 % more than asked, within the bounds', () => {
    expect(nextRetry(SCHEDULE, 1, 20_000, () => 0.5)).toEqual({ kind: 'retry', delayMs: 22_000, notBeforeMs: null });
    expect(nextRetry(SCHEDULE, 1, 1000, () => 0.5)).toEqual({ kind: 'retry', delayMs: 5500, notBeforeMs: null });
    expect(nextRetry(SCHEDULE, 1, 55_000, () => 0.999_999)).toEqual({ kind: 'retry', delayMs: 60_000, notBeforeMs: null });
    const delays = new Set(Array.from({ length: 50 }, () => {
      const d = nextRetry(SCHEDULE, 1, 1000);
      return d.kind === 'retry' ? d.delayMs : -1;
    }));
    expect(delays.size).toBeGreaterThan(10);
    for (const d of delays) expect(d >= 5000 && d <= 6000, String(d)).toBe(true);
  });

  it('never retries sooner than the schedule, however long its delays', () => {
    for (const retryAfterMs of [0, 1000, 3_600_000, 86_400_000]) {
      for (const seconds of [7200, 14_400, 29_845]) {
        const decision = nextRetry([seconds], 1, retryAfterMs);
        expect(decision.kind === 'retry' && decision.delayMs >= seconds * 1000, `${seconds} s scheduled, Retry-After ${retryAfterMs} ms`).toBe(true);
      }
    }
  });

  it('keeps the default 24 h window when every answer carries a Retry-After', () => {
    const schedule = loadConfig({}).webhooks.retryScheduleSeconds;
    const span = (retryAfterMs: number, random: () => number = () => 0) => {
      let total = 0;
      for (let attempts = 1; ; attempts++) {
        const decision = nextRetry(schedule, attempts, retryAfterMs, random);
        if (decision.kind === 'exhausted') return total;
        total = Math.max(total + decision.delayMs, decision.notBeforeMs ?? 0);
      }
    };
    expect(span(0)).toBe(24 * 3600 * 1000);
    expect(span(0, () => 0.999_999)).toBeGreaterThan(24 * 3600 * 1000);
    expect(span(0, () => 0.999_999)).toBeLessThanOrEqual(1.2 * 24 * 3600 * 1000);
    expect(span(86_400_000)).toBeGreaterThan(24 * 3600 * 1000);
    expect(span(86_400_000)).toBeLessThanOrEqual(24 * 3600 * 1000 + schedule.length * 3_600_000);
  });

  it('gives a window equal to the schedule`s sum (the default is 24 h)', () => {
    expect(retryWindowMs(SCHEDULE)).toBe(155_000);
    expect(retryWindowMs(loadConfig({}).webhooks.retryScheduleSeconds)).toBe(24 * 3600 * 1000);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2024-05-01T00:00:00Z');
  it('reads delay-seconds and HTTP dates', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Wed, 01 May 2024 00:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Tue, 30 Apr 2024 00:00:00 GMT', now)).toBe(0);
  });
  it('reads the two obsolete HTTP date formats too, as GMT', () => {
    expect(parseRetryAfter('Wednesday, 01-May-24 00:02:00 GMT', now)).toBe(120_000);
    expect(parseRetryAfter('Wed May  1 00:03:00 2024', now)).toBe(180_000);
  });
  it('ignores what it cannot read', () => {
    expect(parseRetryAfter(undefined, now)).toBeNull();
    expect(parseRetryAfter('', now)).toBeNull();
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter('-5', now)).toBeNull();
  });
});
