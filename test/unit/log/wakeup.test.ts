import { describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { Wakeup } from '../../../src/log/wakeup.js';
import { quietLogger } from '../../support/harness.js';

/** A wake-up without a channel (local signals only): what ended each wait. */
describe('Wakeup.wait', () => {
  const wakeup = () => new Wakeup(null as unknown as Db, null, quietLogger());

  it('says whether a signal or the timeout ended the wait', async () => {
    const w = wakeup();
    expect(await w.wait(10)).toBe(false);
    w.signal();
    expect(await w.wait(10_000)).toBe(true);
    // The signal was taken: the next wait runs to its timeout.
    expect(await w.wait(10)).toBe(false);
    const during = w.wait(10_000);
    setTimeout(() => w.signal(), 5);
    expect(await during).toBe(true);
  });

  it('ends every wait at once after a stop', async () => {
    const w = wakeup();
    await w.stop();
    expect(await w.wait(10_000)).toBe(true);
  });
});
