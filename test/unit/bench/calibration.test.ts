import { describe, expect, it } from 'vitest';
import { calibrate, describeCalibration } from '../../../bench/support/calibration.js';

describe('bench calibration', () => {
  it('times the rounds it was asked for and reports the best round at or above the median', () => {
    const c = calibrate(3, 500);
    expect(c.rounds).toBe(3);
    expect(c.opsPerRound).toBe(500);
    expect(c.medianOpsPerSec).toBeGreaterThan(0);
    expect(c.bestOpsPerSec).toBeGreaterThanOrEqual(c.medianOpsPerSec);
    expect(Number.isInteger(c.bestOpsPerSec) && Number.isInteger(c.medianOpsPerSec)).toBe(true);
  });

  it('refuses rounds or sizes that measure nothing', () => {
    expect(() => calibrate(0)).toThrow(/rounds must be a positive integer/);
    expect(() => calibrate(2.5)).toThrow(/rounds must be a positive integer/);
    expect(() => calibrate(3, 0)).toThrow(/opsPerRound must be a positive integer/);
  });

  it('describes a result in thousands, best round first', () => {
    expect(describeCalibration({ bestOpsPerSec: 158_123, medianOpsPerSec: 154_600, rounds: 5, opsPerRound: 20_000 })).toBe('158.1k ops/s (median round 154.6k)');
    expect(describeCalibration({ bestOpsPerSec: 950, medianOpsPerSec: 900, rounds: 5, opsPerRound: 20_000 })).toBe('950 ops/s (median round 900)');
  });
});
