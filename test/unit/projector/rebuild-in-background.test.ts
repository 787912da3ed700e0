import { describe, expect, it } from 'vitest';
import { rebuildInBackground } from '../../../src/projector/rebuild-in-background.js';
import { capturingLogger, waitFor } from '../../support/harness.js';

/** What the loop told the projector, in order. */
function heldBack(): { calls: string[]; takeUp: (names: readonly string[]) => void; rebuildFailed: (err: unknown) => void } {
  const calls: string[] = [];
  return {
    calls,
    takeUp: (names) => calls.push(`takeUp ${names.join(',')}`),
    rebuildFailed: (err) => calls.push(`failed ${(err as Error).message}`),
  };
}

const RETRIES = { firstMs: 10, maxMs: 40 };
const FAILED = 'rebuilding read models failed: their old tables keep serving; trying again';

describe('rebuildInBackground', () => {
  it('tries again after each failure, pausing twice as long up to the longest, until the rebuild succeeds', async () => {
    const { log, lines } = capturingLogger();
    const projector = heldBack();
    let tries = 0;
    const rebuild = async () => {
      tries += 1;
      if (tries <= 4) throw new Error(`try ${tries} failed`);
    };
    rebuildInBackground(['geo'], rebuild, projector, log, RETRIES);
    await waitFor('the projections taken up', async () => projector.calls.includes('takeUp geo'), 5_000, 5);

    expect(projector.calls).toEqual(['failed try 1 failed', 'failed try 2 failed', 'failed try 3 failed', 'failed try 4 failed', 'takeUp geo']);
    const failures = lines().filter((l) => l['msg'] === FAILED);
    expect(failures.map((l) => [l['level'], l['attempt'], l['retryInSeconds'], l['err']])).toEqual([
      [50, 1, 0.01, 'try 1 failed'],
      [50, 2, 0.02, 'try 2 failed'],
      [50, 3, 0.04, 'try 3 failed'],
      [50, 4, 0.04, 'try 4 failed'],
    ]);
    // Each try says so, with the projections.
    const started = lines().filter((l) => l['msg'] === 'read models built by another version of their code: rebuilding');
    expect(started.map((l) => [l['attempt'], l['projections']])).toEqual([1, 2, 3, 4, 5].map((n) => [n, ['geo']]));
  });

  it('stop aborts the try in progress and waits for it to end; the abort is no failure', async () => {
    const { log, lines } = capturingLogger();
    const projector = heldBack();
    let ended = false;
    const rebuild = (signal: AbortSignal) =>
      new Promise<void>((_, reject) => {
        signal.addEventListener('abort', () =>
          setTimeout(() => {
            ended = true;
            reject(signal.reason as Error);
          }, 50),
        );
      });
    const stop = rebuildInBackground(['geo'], rebuild, projector, log, RETRIES);
    await stop();
    expect(ended).toBe(true);
    expect(projector.calls).toEqual([]);
    expect(lines().filter((l) => (l['level'] as number) >= 40)).toEqual([]);
  });

  it('stop during the pause after a failure ends the loop without another try', async () => {
    const { log } = capturingLogger();
    const projector = heldBack();
    let tries = 0;
    const rebuild = async () => {
      tries += 1;
      throw new Error('no');
    };
    const stop = rebuildInBackground(['geo'], rebuild, projector, log, { firstMs: 60_000, maxMs: 60_000 });
    await waitFor('the first failure', async () => projector.calls.length === 1, 5_000, 5);
    await stop();
    expect(tries).toBe(1);
    expect(projector.calls).toEqual(['failed no']);
  });
});
