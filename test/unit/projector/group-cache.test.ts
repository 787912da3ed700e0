import { describe, expect, it } from 'vitest';
import type { LogEvent } from '../../../projections/kit/types.js';
import { GroupCache } from '../../../src/projector/group-cache.js';

const events = (n: number): LogEvent[] => Array.from({ length: n }, (_, i) => ({ position: BigInt(i + 1) }) as LogEvent);
const batch = (...entries: [string, number][]) => new Map(entries.map(([k, n]) => [k, { events: events(n) }]));

describe('GroupCache', () => {
  it('keeps the most recently folded groups, dropping the least recent past maxGroups', () => {
    const cache = new GroupCache(3);
    cache.putAll(batch(['a', 1], ['b', 1], ['c', 1]));
    cache.putAll(batch(['a', 2])); // a is now the most recent
    cache.putAll(batch(['d', 1]));
    expect(['a', 'b', 'c', 'd'].filter((k) => cache.has(k))).toEqual(['a', 'c', 'd']);
    expect(cache.get('a')?.events).toHaveLength(2);
    expect(cache.size).toBe(3);
  });

  it('does not keep a group with more than maxEvents events, and forgets its older state', () => {
    const cache = new GroupCache(10, 4);
    cache.putAll(batch(['a', 4]));
    expect(cache.has('a')).toBe(true);
    cache.putAll(batch(['a', 5]));
    expect(cache.has('a')).toBe(false);
  });

  it('counts hits and misses, and a clear bumps the generation', () => {
    const cache = new GroupCache(10);
    cache.putAll(batch(['a', 1]));
    cache.get('a');
    cache.get('b');
    expect([cache.hits, cache.misses]).toEqual([1, 1]);
    const generation = cache.generation;
    cache.clear();
    expect(cache.generation).toBe(generation + 1);
    expect(cache.has('a')).toBe(false);
  });

  it('keeps nothing when maxGroups is 0', () => {
    const cache = new GroupCache(0);
    cache.putAll(batch(['a', 1]));
    expect(cache.size).toBe(0);
  });
});
