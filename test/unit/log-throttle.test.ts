import { describe, expect, it } from 'vitest';
import { LogThrottle } from '../../src/logger.js';

describe('LogThrottle', () => {
  it('lets one line through per period, and says how many it held back since the last', () => {
    const t = new LogThrottle(10_000);
    expect(t.take(1_000)).toBe(true);
    expect(t.suppressed).toBe(0);
    expect([t.take(2_000), t.take(5_000), t.take(10_999)]).toEqual([false, false, false]);
    expect(t.take(11_000)).toBe(true);
    expect(t.suppressed).toBe(3);
    expect(t.take(30_000)).toBe(true);
    expect(t.suppressed).toBe(0);
  });
});
