import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { RECOVER_MS, UrlLimits } from '../../../src/webhooks/url-limits.js';

const OK = { statusCode: 200, errorClass: null };
const BUSY = { statusCode: 503, errorClass: 'http_status' };

describe('UrlLimits', () => {
  it('gives every URL the cap until it throttles', () => {
    const limits = new UrlLimits(16);
    limits.observe('a', OK, 16, true);
    limits.observe('a', { statusCode: 500, errorClass: 'http_status' }, 16, true);
    limits.observe('a', { statusCode: null, errorClass: 'connect_refused' }, 16, true);
    expect(limits.of('a')).toBe(16);
    expect([...limits.lowered()]).toEqual([]);
  });

  it('halves on 429, 502, 503, 504 and timeouts, once per round, down to 1', () => {
    for (const answer of [
      { statusCode: 429, errorClass: 'http_status' },
      { statusCode: 502, errorClass: 'http_status' },
      { statusCode: 503, errorClass: 'http_status' },
      { statusCode: 504, errorClass: 'http_status' },
      { statusCode: null, errorClass: 'timeout' },
    ]) {
      const limits = new UrlLimits(16);
      limits.observe('a', answer, 16, true);
      expect(limits.of('a')).toBe(8);
      // The 15 other answers of that round (sent before the decrease) do not halve it again.
      for (let i = 0; i < 15; i++) limits.observe('a', answer, 16 - i - 1, true);
      expect(limits.of('a')).toBe(8);
      limits.observe('a', answer, 8, true);
      expect(limits.of('a')).toBe(4);
      for (let i = 0; i < 7; i++) limits.observe('a', answer, 8 - i - 1, true);
      expect(limits.of('a')).toBe(4);
      // One request in flight at a time: each throttle answer is a round of its own.
      limits.observe('a', answer, 1, true);
      expect(limits.of('a')).toBe(2);
      limits.observe('a', answer, 1, true);
      limits.observe('a', answer, 1, true);
      expect(limits.of('a')).toBe(1);
      expect([...limits.lowered()]).toEqual([['a', 1]]);
    }
  });

  it('grows back by about one slot per round of answers while the URL uses every slot', () => {
    const limits = new UrlLimits(16);
    limits.observe('a', BUSY, 1, true);
    expect(limits.of('a')).toBe(8);
    // A round of 8 answers with every slot in use: one slot more.
    for (let i = 0; i < 8; i++) limits.observe('a', OK, 8, false);
    expect(limits.of('a')).toBe(9);
    // Answers while the URL uses fewer slots than it has, with nothing waiting: no growth.
    for (let i = 0; i < 50; i++) limits.observe('a', OK, 3, false);
    expect(limits.of('a')).toBe(9);
    // Deliveries waiting for a slot count as using every slot.
    for (let i = 0; i < 200; i++) limits.observe('a', OK, 1, true);
    expect(limits.of('a')).toBe(16);
    expect([...limits.lowered()]).toEqual([]);
  });

  it('is back at the cap once the URL has not throttled for RECOVER_MS, however little it was used', () => {
    let now = 1_000_000;
    const limits = new UrlLimits(16, true, () => now);
    limits.observe('quiet', BUSY, 1, false);
    limits.observe('hung', { statusCode: null, errorClass: 'timeout' }, 1, false);
    expect([...limits.lowered()]).toEqual([['quiet', 8], ['hung', 8]]);
    now += RECOVER_MS - 1;
    // Still timing out: held again, from its last throttle.
    limits.observe('hung', { statusCode: null, errorClass: 'timeout' }, 1, false);
    expect([limits.of('quiet'), limits.of('hung')]).toEqual([8, 4]);
    now += 1;
    expect([limits.of('quiet'), limits.of('hung')]).toEqual([16, 4]);
    expect([...limits.lowered()]).toEqual([['hung', 4]]);
    now += RECOVER_MS;
    expect([...limits.lowered()]).toEqual([]);
  });

  it('forgets a URL that changed, or all of them, at once', () => {
    const limits = new UrlLimits(16);
    limits.observe('a', BUSY, 1, false);
    limits.observe('b', BUSY, 1, false);
    limits.forget('a');
    expect([limits.of('a'), limits.of('b')]).toEqual([16, 8]);
    limits.forgetAll();
    expect([...limits.lowered()]).toEqual([]);
  });

  it('passes over the answers to requests sent before a URL changed, then counts again', () => {
    const limits = new UrlLimits(16);
    limits.observe('a', BUSY, 3, false);
    // Changed with 3 requests in flight (sent to the old address): their throttle answers move nothing.
    limits.forget('a', 3);
    for (const inFlight of [3, 2, 1]) limits.observe('a', BUSY, inFlight, false);
    expect([limits.of('a'), [...limits.lowered()]]).toEqual([16, []]);
    // A request sent after the change, answered 503: halved as any.
    limits.observe('a', BUSY, 1, false);
    expect(limits.of('a')).toBe(8);
  });

  it('keeps URLs apart, and keeps the cap when not adaptive', () => {
    const limits = new UrlLimits(4);
    limits.observe('slow', BUSY, 4, true);
    expect([limits.of('slow'), limits.of('fast')]).toEqual([2, 4]);
    const fixed = new UrlLimits(4, false);
    fixed.observe('slow', BUSY, 4, true);
    expect(fixed.of('slow')).toBe(4);
  });

  it('is on by default and can be turned off (WEBHOOK_ADAPTIVE_CONCURRENCY)', () => {
    expect(loadConfig({}).webhooks.adaptiveConcurrency).toBe(true);
    expect(loadConfig({ WEBHOOK_ADAPTIVE_CONCURRENCY: 'false' }).webhooks.adaptiveConcurrency).toBe(false);
  });
});
