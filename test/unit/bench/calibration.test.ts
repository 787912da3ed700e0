import { describe, expect, it } from 'vitest';
import { calibrate, calibrateLoopback, describeCalibration, describeMachineCalibration } from '../../../bench/support/calibration.js';

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

  it('times round trips over loopback TCP, and closes what it opened', async () => {
    const before = process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap').length;
    const c = await calibrateLoopback(2, 200);
    expect(c.rounds).toBe(2);
    expect(c.opsPerRound).toBe(200);
    expect(c.medianOpsPerSec).toBeGreaterThan(0);
    expect(c.bestOpsPerSec).toBeGreaterThanOrEqual(c.medianOpsPerSec);
    await new Promise((r) => setImmediate(r));
    expect(process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap').length).toBe(before);
    await expect(calibrateLoopback(0)).rejects.toThrow(/rounds must be a positive integer/);
  });

  it('describes both calibrations', () => {
    const compute = { bestOpsPerSec: 158_123, medianOpsPerSec: 154_600, rounds: 5, opsPerRound: 20_000 };
    const loopback = { bestOpsPerSec: 45_600, medianOpsPerSec: 42_300, rounds: 5, opsPerRound: 2_000 };
    expect(describeMachineCalibration({ compute, loopback })).toBe('compute 158.1k ops/s (median round 154.6k), loopback 45.6k round trips/s (median round 42.3k)');
  });
});
