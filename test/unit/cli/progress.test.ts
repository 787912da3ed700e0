import cliProgress from 'cli-progress';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { formatEta } from '../../../src/cli/progress.js';
import { phaseBars } from '../../../src/cli/replay.js';

/** What the progress output says: an ETA it cannot tell yet, each phase's end and unit. */

afterEach(() => {
  vi.restoreAllMocks();
});

/** What is written to stderr from now on (until the mocks are restored). */
function capturedStderr(): string[] {
  const written: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  return written;
}

describe('progress output', () => {
  it("an ETA cli-progress cannot tell yet ('INF', 'NULL') shows as …, not NFs / LLs", () => {
    const options = { autopaddingChar: '0' } as cliProgress.Options;
    expect(formatEta('INF' as unknown as number, options, 5)).toBe('…');
    expect(formatEta('NULL' as unknown as number, options, 5)).toBe('…');
    expect(formatEta(75, options, 5)).toBe('01m15s');
    expect(formatEta(3, options, 5)).toBe('03s');
  });

  it('replay without a terminal: each phase ends on its full count but the catch-up, on its last, and every phase names its unit', () => {
    const written = capturedStderr();
    const bars = phaseBars(false);
    bars.update({ phase: 'read', done: 0, total: 204_012, gauge: 'none' });
    bars.update({ phase: 'read', done: 204_012, total: 204_012, gauge: 'none' });
    bars.update({ phase: 'build', done: 61, total: 63, gauge: 'steps' });
    bars.update({ phase: 'catch-up', done: 0, total: 16_000 });
    bars.update({ phase: 'catch-up', done: 10_000, total: 16_000 });
    bars.update({ phase: 'swap', done: 0, total: 1, gauge: 'steps' });
    bars.update({ phase: 'swap', done: 1, total: 1, gauge: 'steps' });
    bars.stop();
    const lines = written.join('').split('\n');
    // A rate where the count grows steadily; the time spent where it counts statements or nothing.
    expect(lines).toEqual([
      'replay: reading the log (204012 positions)',
      expect.stringMatching(/^replay: reading the log 204012\/204012 \(\d+ s\)$/),
      'replay: building tables (63 tables and indexes)',
      expect.stringMatching(/^replay: building tables 63\/63 \(\d+ s\)$/),
      'replay: catching up (16000 positions)',
      // It ends near the head, or where it stopped gaining on the appends: not on the total.
      expect.stringMatching(/^replay: catching up 10000\/16000 \(\d+\/s\)$/),
      'replay: swapping in (1 step)',
      '',
    ]);
  });

  it('replay without a terminal: a wait for the swap’s locks names what holds them, again when that changes, and does not end on its limit', () => {
    const written = capturedStderr();
    const bars = phaseBars(false);
    bars.update({ phase: 'catch-up', done: 10, total: 10 });
    // The swap's first try, whose locks do not come: it did not swap anything in.
    bars.update({ phase: 'swap', done: 0, total: 1, gauge: 'steps' });
    bars.update({ phase: 'wait', done: 0, total: 300, waitingFor: 'geo_stats, held by pid 42 (…)' });
    bars.update({ phase: 'wait', done: 2, total: 300, waitingFor: 'geo_stats, held by pid 42 (…)' });
    bars.update({ phase: 'wait', done: 4, total: 300, waitingFor: 'geo_stats, held by pid 43 (…)' });
    bars.update({ phase: 'swap', done: 1, total: 1 });
    bars.stop();
    const lines = written.join('').split('\n').map((l) => l.replace(/ \(\d+\/s\)$/, ''));
    expect(lines).toEqual([
      'replay: catching up (10 positions)',
      'replay: catching up 10/10',
      'replay: swapping in (1 step)',
      expect.stringMatching(/^replay: swapping in 0\/1 \(\d+ s\)$/),
      'replay: waiting for locks (300 s)',
      'replay: waiting for locks 0/300 s: geo_stats, held by pid 42 (…)',
      'replay: waiting for locks 4/300 s: geo_stats, held by pid 43 (…)',
      'replay: swapping in (1 step)',
      '',
    ]);
  });

  it('replay without a terminal: a phase that counts nothing for a while still prints a line every few seconds', () => {
    vi.useFakeTimers();
    const written = capturedStderr();
    try {
      const bars = phaseBars(false);
      bars.update({ phase: 'read', done: 0, total: 204_012, gauge: 'none' });
      vi.advanceTimersByTime(12_000);
      bars.stop();
    } finally {
      vi.useRealTimers();
    }
    expect(written.join('').split('\n')).toEqual(['replay: reading the log (204012 positions)', 'replay: reading the log … (6 s)', 'replay: reading the log … (12 s)', '']);
  });

  it('replay on a terminal: rate and ETA only where the count grows steadily; the time spent elsewhere', () => {
    const written = capturedStderr();
    // cli-progress draws only on a terminal (and cuts its line to the terminal's width).
    const terminal = { isTTY: process.stderr.isTTY, columns: process.stderr.columns };
    Object.assign(process.stderr, { isTTY: true, columns: 200 });
    try {
      const bars = phaseBars(true);
      bars.update({ phase: 'read', done: 0, total: 204_012, gauge: 'none' });
      bars.update({ phase: 'build', done: 7, total: 63, gauge: 'steps' });
      bars.update({ phase: 'catch-up', done: 500, total: 16_000 });
      bars.stop();
    } finally {
      Object.assign(process.stderr, terminal);
    }
    // eslint-disable-next-line no-control-regex -- the terminal's escape sequences, taken out
    const drawn = written.join('').replace(/\x1b(\[[0-9;?]*[A-Za-z]|[78])/g, '');
    expect(drawn).toMatch(/reading the log +\| 204012 positions \| \d+s so far/);
    expect(drawn).toMatch(/building tables +\|[░█]+\| \d+% \| \d+\/63 tables and indexes \| \d+s so far/);
    expect(drawn).not.toMatch(/building tables[^\n\r]*\/s/);
    expect(drawn).toMatch(/catching up +\|[░█]+\| 3% \| 500\/16000 positions \| \d+\/s \| ETA/);
  });
});
