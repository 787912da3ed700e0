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

/** A channel's LISTEN that comes through only after the wake-up was stopped. */
describe('Wakeup.stop while its LISTEN is on its way', () => {
  /** A Db whose `listen` answers when `answer()` is called, and counts what is still listening. */
  function slowDb() {
    let listening = 0;
    const pending: (() => void)[] = [];
    const db = {
      listen: (_channel: string, _onNotify: () => void) =>
        new Promise<() => Promise<void>>((resolve) => {
          pending.push(() => {
            listening += 1;
            resolve(async () => {
              listening -= 1;
            });
          });
        }),
    } as unknown as Db;
    return { db, answer: () => pending.splice(0).forEach((p) => p()), listening: () => listening };
  }

  it('lets go of a LISTEN that arrives after the stop', async () => {
    const { db, answer, listening } = slowDb();
    const w = new Wakeup(db, 'mt_slow', quietLogger());
    const starting = w.start();
    await w.stop();
    answer();
    await starting;
    await new Promise((r) => setTimeout(r, 10));
    expect(listening()).toBe(0);
  });

  it('keeps one that arrives before', async () => {
    const { db, answer, listening } = slowDb();
    const w = new Wakeup(db, 'mt_slow', quietLogger());
    const starting = w.start();
    answer();
    await starting;
    expect(listening()).toBe(1);
    await w.stop();
    expect(listening()).toBe(0);
  });
});
