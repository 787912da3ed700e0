import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { toJson, wireId } from '../../../src/api/conventions/json.js';
import { pageOf } from '../../../src/api/conventions/paging.js';
import { bool, int64, parseQuery, timestamp } from '../../../src/api/conventions/params.js';
import { AuthFailureLimiter, RateLimiter, clientKey } from '../../../src/api/conventions/rate-limit.js';
import { orderBy } from '../../../src/api/conventions/sort.js';
import { parseInstant, parseTimestamp, rfc3339 } from '../../../src/api/conventions/time.js';
import { parseTime } from '../../../src/webhooks/webhook-attempts.js';
import { z } from 'zod';
import { createServer } from '../../../src/http/server.js';
import { quietLogger } from '../../support/harness.js';

describe('timestamps', () => {
  it.each([
    ['1700000000', 1_700_000_000],
    ['2023-11-14T22:13:20Z', 1_700_000_000],
    ['2023-11-14T22:13:20', 1_700_000_000],
    ['2023-11-14T23:13:20+01:00', 1_700_000_000],
    ['2023-11-14T23:13:20+0100', 1_700_000_000],
    ['2023-11-14 22:13:20', 1_700_000_000],
    ['2023-11-14T22:13:20.999Z', 1_700_000_000],
    ['2023-11-14', 1_699_920_000],
    // `+01:00` unencoded in a query string arrives as ` 01:00`.
    ['2023-11-14T23:13:20 01:00', 1_700_000_000],
    ['2023-11-14 23:13:20 01:00', 1_700_000_000],
  ])('reads %s', (text, seconds) => expect(parseTimestamp(text)).toBe(seconds));

  it.each(['yesterday', '2023-02-30T00:00:00Z', '2023-13-01', '99999999999999', '-5', '1e9', '', '2023-11-14T23:13:20 0100'])('refuses %j', (text) => expect(parseTimestamp(text)).toBeNull());

  it('rounds a fraction of a second as the comparison it feeds needs: up for >= and <, down for > and =', () => {
    expect(parseTimestamp('2023-11-14T22:13:20.5Z', 'up')).toBe(1_700_000_001);
    expect(parseTimestamp('2023-11-14T22:13:20.0001Z', 'up')).toBe(1_700_000_001);
    expect(parseTimestamp('2023-11-14T22:13:20.000Z', 'up')).toBe(1_700_000_000);
    expect(parseTimestamp('1700000000', 'up')).toBe(1_700_000_000);
    expect(parseTimestamp('2023-11-14T22:13:20.5Z', 'down')).toBe(1_700_000_000);
    expect(parseTimestamp('9999-12-31T23:59:59.5Z', 'up')).toBeNull();
    const bounds = z.object({ a: timestamp('atOrAfter'), b: timestamp('before'), c: timestamp('after'), d: timestamp('at') });
    const at = '2023-11-14T22:13:20.25Z';
    expect(bounds.parse({ a: at, b: at, c: at, d: at })).toEqual({ a: 1_700_000_001, b: 1_700_000_001, c: 1_700_000_000, d: 1_700_000_000 });
  });

  it('reads the instant with its fraction, to the millisecond for webhook ranges', () => {
    expect(parseInstant('2023-11-14T23:13:20.25+01:00')).toEqual({ seconds: 1_700_000_000, fraction: 0.25 });
    expect(parseTime('2023-11-14T22:13:20.25Z')?.toISOString()).toBe('2023-11-14T22:13:20.250Z');
    expect(parseTime('2024-02-31T00:00:00Z')).toBeNull();
  });

  it('writes RFC 3339 with Z, and "" for none', () => {
    expect(rfc3339(1_700_000_000n)).toBe('2023-11-14T22:13:20Z');
    expect(rfc3339(null)).toBe('');
  });
});

describe('query parameters', () => {
  const schema = z.object({ SourceID: int64().optional(), countOnly: bool().optional(), FromTS: timestamp('atOrAfter').optional() });

  it('matches names without regard to case or a [] suffix', () => {
    expect(parseQuery(schema, { sourceid: '18446744073709551615', COUNTONLY: 'TRUE', 'fromts[]': '2023-11-14' })).toEqual({
      SourceID: 18_446_744_073_709_551_615n,
      countOnly: true,
      FromTS: 1_699_920_000,
    });
  });

  it('ignores unknown parameters', () => expect(parseQuery(schema, { Whatever: 'x' })).toEqual({}));

  it.each([
    [{ SourceID: '-1' }, /Invalid parameter SourceID: must be a non-negative whole number \(got "-1"\)/],
    [{ SourceID: '18446744073709551616' }, /SourceID: is beyond the 64-bit range/],
    [{ countOnly: 'yes' }, /countOnly: must be true, false, 1 or 0/],
    [{ FromTS: 'soon' }, /FromTS: must be Unix seconds or an RFC 3339/],
  ])('answers 400 naming the parameter for %j', (raw, message) => {
    expect(() => parseQuery(schema, raw)).toThrow(message);
    try {
      parseQuery(schema, raw);
    } catch (err) {
      expect(err).toMatchObject({ statusCode: 400 });
    }
  });

  it('pages: default 10, 0 means 1000, above 1000 is refused', () => {
    expect(pageOf({})).toEqual({ limit: 10, offset: 0, countOnly: false });
    expect(pageOf({ Limit: 0, Offset: 20 })).toEqual({ limit: 1000, offset: 20, countOnly: false });
    expect(() => pageOf({ Limit: 1001 })).toThrow(/Limit: must be at most 1000/);
  });
});

describe('Sort', () => {
  const sortable = { ID: sql.ref('id'), ProcessedCount: sql.ref('processed') };
  it.each([
    ['ProcessedCount DESC'],
    ['ProcessedCount+DESC'],
    ['processedcount desc'],
    [' ProcessedCount   DESC '],
  ])('reads %j as descending', (text) => {
    const q = orderBy('x', text, sortable, []);
    expect(JSON.stringify(q.toOperationNode())).toMatch(/DESC/);
  });
  it('reads comma lists and refuses other properties by name', () => {
    expect(JSON.stringify(orderBy('x', 'ID, ProcessedCount DESC', sortable, []).toOperationNode())).toMatch(/ASC.*DESC/);
    expect(() => orderBy('x', 'Email', sortable, [])).toThrow(/Invalid parameter Sort: "Email" is not a sortable property of x; sort by ID, ProcessedCount/);
    expect(() => orderBy('x', 'ID sideways', sortable, [])).toThrow(/Sort/);
  });
});

describe('JSON', () => {
  it('writes 64-bit ids as bare integers, and only bigints', () => {
    const text = toJson({ ID: 19_421_777_835_146_490n, Small: wireId('12'), Big: wireId('18446744073709551615'), Text: '^not-a-mark:1' });
    expect(text).toBe('{"ID":19421777835146490,"Small":12,"Big":18446744073709551615,"Text":"^not-a-mark:1"}');
  });
});

describe('limits', () => {
  it('rate-limits per key with a token bucket', () => {
    let now = 0;
    const l = new RateLimiter(10, 2, () => now);
    expect([l.take('a'), l.take('a')]).toEqual([0, 0]);
    expect(l.take('a')).toBeCloseTo(0.1);
    expect(l.take('b')).toBe(0);
    now = 100;
    expect(l.take('a')).toBe(0);
  });

  it('blocks an address after repeated failed logins, for the rest of the window', () => {
    let now = 0;
    const l = new AuthFailureLimiter(3, 60_000, () => now);
    for (let i = 0; i < 3; i++) l.fail('1.2.3.4');
    expect(l.blockedFor('1.2.3.4')).toBe(60);
    expect(l.blockedFor('5.6.7.8')).toBe(0);
    now = 60_000;
    expect(l.blockedFor('1.2.3.4')).toBe(0);
  });

  it('counts checks still running as failures, each distinct credentials once', () => {
    const l = new AuthFailureLimiter(3, 60_000, () => 0);
    for (let i = 0; i < 10; i++) l.begin('1.2.3.4', 'same');
    expect(l.blockedFor('1.2.3.4')).toBe(0);
    l.begin('1.2.3.4', 'other');
    l.begin('1.2.3.4', 'third');
    expect(l.blockedFor('1.2.3.4')).toBe(1);
    l.end('1.2.3.4', 'third');
    expect(l.blockedFor('1.2.3.4')).toBe(0);
    l.fail('1.2.3.4');
    expect(l.blockedFor('1.2.3.4')).toBe(60);
    for (let i = 0; i < 10; i++) l.end('1.2.3.4', 'same');
    l.end('1.2.3.4', 'other');
    expect(l.blockedFor('1.2.3.4')).toBe(0);
  });

  it('counts an IPv6 client by its /64, so rotating addresses within it does not help', () => {
    const l = new AuthFailureLimiter(3, 60_000, () => 0);
    l.fail('2001:db8:1:2::1');
    l.fail('2001:db8:1:2:ffff:0:0:7');
    l.fail('2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd');
    expect(l.blockedFor('2001:db8:1:2::abcd')).toBe(60);
    expect(l.blockedFor('2001:db8:1:3::1')).toBe(0); // the next /64 is another client
    l.fail('::ffff:10.0.0.1');
    l.fail('10.0.0.1');
    l.fail('::FFFF:10.0.0.1');
    expect(l.blockedFor('10.0.0.1')).toBe(60); // IPv4-mapped is the IPv4 address
  });

  it.each([
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0DB8:0000:0002:1:2:3:4', '2001:db8:0:2::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['2001:db8::', '2001:db8:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['192.0.2.1', '192.0.2.1'],
    ['not an address', 'not an address'],
    ['1::2::3', '1::2::3'],
  ])('counts %s as %s', (address, key) => expect(clientKey(address)).toBe(key));

  it('when full, drops expired records and then the oldest, never all of them', () => {
    let now = 0;
    const l = new AuthFailureLimiter(2, 60_000, () => now, 10);
    for (let i = 0; i < 2; i++) l.fail('198.51.100.7'); // blocked, and the oldest record
    now = 1000;
    for (let i = 0; i < 9; i++) l.fail(`203.0.113.${i}`);
    expect(l.size).toBe(10);
    l.fail('203.0.113.200'); // full: no record has expired, so the oldest go, down to 9
    expect(l.size).toBe(10);
    expect(l.blockedFor('198.51.100.7')).toBe(0);
    now = 62_000; // every record so far has expired
    l.fail('203.0.113.201');
    expect(l.size).toBeLessThanOrEqual(10);
    for (let i = 0; i < 2; i++) l.fail('198.51.100.8');
    expect(l.blockedFor('198.51.100.8')).toBe(60);
  });
});

describe('transport', () => {
  it('refuses plain HTTP off loopback unless allowed', () => {
    expect(() => createServer({ port: 0, host: '0.0.0.0', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger())).toThrow(/Refusing to serve plain HTTP/);
    expect(() => createServer({ port: 0, host: '0.0.0.0', tls: null, allowInsecureHttp: true, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger())).not.toThrow();
    expect(() => createServer({ port: 0, host: '127.0.0.1', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger())).not.toThrow();
  });
});
