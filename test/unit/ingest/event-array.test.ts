import { describe, expect, it } from 'vitest';
import { splitJsonArray } from '../../../src/events/json-text.js';
import { eventArrayItems } from '../../../src/ingest/event-array.js';

/** A small deterministic random source (the same cases every run). */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

const TRICKY = ['', ',', ']', '}', '[', '{', '"', '\\', '\\"', 'a,b]c', 'é😀', '\u2028', '\\u005d'];

function value(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 2 ? 4 : 7));
  if (k === 0) return Math.floor(r() * 1e6) - 5e5;
  if (k === 1) return TRICKY[Math.floor(r() * TRICKY.length)];
  if (k === 2) return r() < 0.5 ? null : r() < 0.5;
  if (k === 3) return r() * 1e3;
  if (k === 4) return Array.from({ length: Math.floor(r() * 4) }, () => value(r, depth + 1));
  return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, (_, i) => [`${TRICKY[i % TRICKY.length]}k${i}`, value(r, depth + 1)]));
}

describe('splitJsonArray', () => {
  it('gives each element`s text, compact or pretty-printed, whatever its strings hold', () => {
    const r = random(7);
    for (let n = 0; n < 300; n++) {
      const array = Array.from({ length: Math.floor(r() * 6) }, () => value(r, 0));
      for (const text of [JSON.stringify(array), JSON.stringify(array, null, 2), ` \n${JSON.stringify(array, null, '\t')}\r\n `]) {
        const parts = splitJsonArray(text);
        expect(parts.map((p) => JSON.parse(p) as unknown), text).toEqual(array);
        for (const p of parts) expect(p).toBe(p.trim());
      }
    }
  });

  it('keeps an element`s own spelling', () => {
    expect(splitJsonArray('[ 1.50 , {"a" : 1e400} ,"x\\"]" ]')).toEqual(['1.50', '{"a" : 1e400}', '"x\\"]"']);
    expect(splitJsonArray('[]')).toEqual([]);
    expect(splitJsonArray(' [ ] ')).toEqual([]);
  });
});

describe('eventArrayItems', () => {
  it('refuses what is not a JSON array of at most the limit', () => {
    expect(() => eventArrayItems('{"event":"open"}', 10)).toThrow(/must be a JSON array/);
    expect(() => eventArrayItems('[{"event":', 10)).toThrow(/not valid JSON/);
    expect(() => eventArrayItems('[1,2,3]', 2)).toThrow(/Too many events: 3 in one request, at most 2/);
  });

  it('parses each element on its own, 64-bit integers exact', () => {
    const items = eventArrayItems('[{"MessageID":19421777835146999},{"a":1,"a":2,"n":{"m":19421777835146999}}, "x"]', 10);
    expect(items[0]).toEqual({ text: '{"MessageID":19421777835146999}', value: { MessageID: 19_421_777_835_146_999n } });
    expect(items[1]).toMatchObject({ text: '{"a":1,"a":2,"n":{"m":19421777835146999}}', error: expect.stringMatching(/^event is not valid JSON \(.*'a'/) });
    expect(items[2]).toEqual({ text: '"x"', value: 'x' });
  });
});
