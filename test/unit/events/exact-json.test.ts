import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseExactJson, stringifyExactJson } from '../../../src/events/exact-json.js';

describe('parseExactJson', () => {
  it('keeps integers above 2^53 exact, at the top level and nested', () => {
    expect(parseExactJson('{"MessageID":19421777835146490,"time":1}')).toEqual({ MessageID: 19421777835146490n, time: 1 });
    expect(parseExactJson('{"a":{"b":[18446744073709551615]}}')).toEqual({ a: { b: [18446744073709551615n] } });
    expect(parseExactJson('[9007199254740993, 1.5]')).toEqual([9007199254740993n, 1.5]);
  });

  it('is not fooled by the key appearing inside a string or twice', () => {
    const tricky = '{"Payload":"{\\"MessageID\\": 1}","MessageID":19421777835146490}';
    expect(parseExactJson(tricky)).toEqual({ Payload: '{"MessageID": 1}', MessageID: 19421777835146490n });
    const nested = '{"x":{"MessageID":19421777835146491},"MessageID":19421777835146490}';
    expect(parseExactJson(nested)).toEqual({ x: { MessageID: 19421777835146491n }, MessageID: 19421777835146490n });
  });

  it('keeps every one of thousands of top-level integers above 2^53 exact', () => {
    const n = 5000;
    const text = `{"event":"sent",${Array.from({ length: n }, (_, i) => `"k${i}":${9007199254740993n + BigInt(i)}`).join(',')}}`;
    const parsed = parseExactJson(text) as Record<string, unknown>;
    for (let i = 0; i < n; i++) expect(parsed[`k${i}`]).toBe(9007199254740993n + BigInt(i));
  });

  it('leaves a key spelled with an escaped underscore or digit to the lossless parse', () => {
    // JSON.parse keeps the escaped spelling's (last) value; a text search finds only the plain one.
    const twice = '{"MessageID":9100,"mj_campaign_id":9007199254740993,"mj\\u005fcampaign_id":9007199254740992}';
    expect(() => parseExactJson(twice)).toThrow(/Duplicate key 'mj_campaign_id'/);
    const digit = '{"MessageID":9100,"k1":9007199254740993,"k\\u0031":9007199254740992}';
    expect(() => parseExactJson(digit)).toThrow(/Duplicate key 'k1'/);
    // An escape encoders write on their own (`&` in a URL) keeps the read-back path, with the same result.
    expect(parseExactJson('{"url":"a?b\\u0026c","MessageID":19421777835146490}')).toEqual({ url: 'a?b&c', MessageID: 19421777835146490n });
  });

  it('reads a big integer back as before when an escaped character is in a value or a nested key, not a top-level key', () => {
    // The lossless parse refuses a nested key given twice, which JSON.parse (and so every other event) takes, the last one winning.
    const text = '{"event":"open","MessageID":19421777835146490,"ua":"a\\u0020b","x":{"k":1,"k":2},"y":{"n\\u0031":3}}';
    expect(parseExactJson(text)).toEqual({ event: 'open', MessageID: 19421777835146490n, ua: 'a b', x: { k: 2 }, y: { n1: 3 } });
    // Spelled so at the top level, still the lossless parse's.
    expect(() => parseExactJson('{"MessageID":19421777835146490,"ua\\u0020":"a","x":{"k":1,"k":2}}')).toThrow(/Duplicate key 'k'/);
  });

  it('leaves safe numbers and non-integers as numbers', () => {
    expect(parseExactJson('{"a":9007199254740991,"b":1e300,"c":-0.5}')).toEqual({ a: 9007199254740991, b: 1e300, c: -0.5 });
  });

  it('round-trips any 64-bit unsigned id, whatever the surrounding fields', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.string(), fc.boolean(), (id, s, first) => {
        const text = first ? `{"MessageID":${id},"s":${JSON.stringify(s)}}` : `{"s":${JSON.stringify(s)}, "MessageID" : ${id} }`;
        const parsed = parseExactJson(text) as Record<string, unknown>;
        expect(BigInt(parsed['MessageID'] as number | bigint)).toBe(id);
        expect(parsed['s']).toBe(s);
        expect(stringifyExactJson(parsed)).toContain(`"MessageID":${id}`);
      }),
      { numRuns: 2000 },
    );
  });
});
