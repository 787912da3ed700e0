import cliProgress from 'cli-progress';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { formatEta } from '../../../src/cli/progress.js';
import { phaseBars } from '../../../src/cli/replay.js';

/** What the progress output says: an ETA it cannot tell yet, each phase's end and unit. */

afterEach(() => {
  vi.restoreAllMocks();
});

describe('progress output', () => {
  it("an ETA cli-progress cannot tell yet ('INF', 'NULL') shows as …, not NFs / LLs", () => {
    const options = { autopaddingChar: '0' } as cliProgress.Options;
    expect(formatEta('INF' as unknown as number, options, 5)).toBe('…');
    expect(formatEta('NULL' as unknown as number, options, 5)).toBe('…');
    expect(formatEta(75, options, 5)).toBe('01m15s');
    expect(formatEta(3, options, 5)).toBe('03s');
  });

  it('replay without a terminal: each phase ends on its full count, and every phase names its unit', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const bars = phaseBars(false);
    bars.update({ phase: 'read', done: 0, total: 204_012 });
    bars.update({ phase: 'read', done: 100_000, total: 204_012 });
    bars.update({ phase: 'build', done: 12, total: 13 });
    bars.update({ phase: 'index', done: 1, total: 4 });
    bars.update({ phase: 'swap', done: 1, total: 1 });
    bars.stop();
    const lines = written.join('').split('\n').map((l) => l.replace(/ \(\d+\/s\)$/, ''));
    expect(lines).toEqual([
      'replay: reading the log (204012 positions)',
      'replay: reading the log 0/204012',
      'replay: reading the log 204012/204012',
      'replay: building tables (13 tables)',
      'replay: building tables 13/13',
      'replay: indexing (4 indexes)',
      'replay: indexing 4/4',
      'replay: swapping in (1 step)',
      '',
    ]);
  });

  it('replay without a terminal: a wait for the swap’s locks names what holds them, again when that changes, and does not end on its limit', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const bars = phaseBars(false);
    bars.update({ phase: 'catch-up', done: 10, total: 10 });
    bars.update({ phase: 'wait', done: 0, total: 300, waitingFor: 'geo_stats, held by pid 42 (…)' });
    bars.update({ phase: 'wait', done: 2, total: 300, waitingFor: 'geo_stats, held by pid 42 (…)' });
    bars.update({ phase: 'wait', done: 4, total: 300, waitingFor: 'geo_stats, held by pid 43 (…)' });
    bars.update({ phase: 'swap', done: 1, total: 1 });
    bars.stop();
    const lines = written.join('').split('\n').map((l) => l.replace(/ \(\d+\/s\)$/, ''));
    expect(lines).toEqual([
      'replay: catching up (10 positions)',
      'replay: catching up 10/10',
      'replay: waiting for locks (300 s)',
      'replay: waiting for locks 0/300 s: geo_stats, held by pid 42 (…)',
      'replay: waiting for locks 4/300 s: geo_stats, held by pid 43 (…)',
      'replay: swapping in (1 step)',
      '',
    ]);
  });
});
