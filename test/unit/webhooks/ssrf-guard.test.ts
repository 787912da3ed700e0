import type dns from 'node:dns';
import { describe, expect, it } from 'vitest';
import { EMPTY_ALLOW_LIST, SsrfError, allowListEntryProblem, forbiddenRange, guardedLookup, parseAllowList, vetAddresses, vetLiteralHost } from '../../../src/webhooks/ssrf-guard.js';

/** The host the request would go to, as the URL parser hands it over. */
const hostOf = (url: string) => new URL(url).hostname;

describe('SSRF guard', () => {
  it.each([
    ['http://127.0.0.1/hook', 'loopback'],
    ['http://[::1]/hook', 'loopback'],
    ['http://10.0.0.1/hook', 'private'],
    ['http://172.16.5.4/hook', 'private'],
    ['http://192.168.1.1/hook', 'private'],
    ['http://169.254.169.254/latest/meta-data', 'linkLocal'],
    ['http://100.64.0.1/hook', 'carrierGradeNat'],
    ['http://0.0.0.0/hook', 'unspecified'],
    ['http://[::]/hook', 'unspecified'],
    ['http://224.0.0.1/hook', 'multicast'],
    ['http://255.255.255.255/hook', 'broadcast'],
    ['http://192.0.2.1/hook', 'reserved'],
    ['http://[::ffff:127.0.0.1]/hook', 'ipv4Mapped'],
    ['http://[::ffff:8.8.8.8]/hook', 'ipv4Mapped'],
    ['http://[fd00::1]/hook', 'uniqueLocal'],
    ['http://[fe80::1]/hook', 'linkLocal'],
    ['http://[64:ff9b::a00:1]/hook', 'rfc6052'],
    ['http://[2002:a00:1::]/hook', '6to4'],
    ['http://[ff02::1]/hook', 'multicast'],
    // Decimal, hex and octal spellings of 127.0.0.1: the URL parser makes them dotted quads.
    ['http://2130706433/hook', 'loopback'],
    ['http://0x7f000001/hook', 'loopback'],
    ['http://017700000001/hook', 'loopback'],
    ['http://0177.0.0.1/hook', 'loopback'],
    ['http://127.1/hook', 'loopback'],
  ])('refuses %s (%s) without the allow-list', (url, range) => {
    const host = hostOf(url);
    expect(() => vetLiteralHost(host, EMPTY_ALLOW_LIST)).toThrow(SsrfError);
    expect(forbiddenRange(host)).toBe(range);
  });

  it('lets public unicast addresses through', () => {
    for (const host of ['8.8.8.8', '93.184.216.34', '[2606:4700:4700::1111]']) {
      expect(() => vetLiteralHost(host, EMPTY_ALLOW_LIST)).not.toThrow();
    }
  });

  it('lets the allow-list`s CIDRs, addresses and host names through, and nothing more', () => {
    const allow = parseAllowList(['127.0.0.1/32', '10.1.0.0/16', '::1', 'hooks.internal']);
    expect(() => vetLiteralHost('127.0.0.1', allow)).not.toThrow();
    expect(() => vetLiteralHost('127.0.0.2', allow)).toThrow(SsrfError);
    expect(() => vetLiteralHost('10.1.200.3', allow)).not.toThrow();
    expect(() => vetLiteralHost('10.2.0.1', allow)).toThrow(SsrfError);
    expect(() => vetLiteralHost('[::1]', allow)).not.toThrow();
    expect(() => vetAddresses('hooks.internal', ['10.9.9.9'], allow)).not.toThrow();
    expect(() => vetAddresses('Hooks.Internal.', ['10.9.9.9'], allow)).not.toThrow();
    expect(() => vetAddresses('other.internal', ['10.9.9.9'], allow)).toThrow('refusing to connect to other.internal: it resolves to an address that is not public (not in WEBHOOK_ALLOWLIST)');
    // The address a name resolves to is not told (a tenant reads the message in its attempts).
    expect(() => vetAddresses('other.internal', ['10.9.9.9'], allow)).not.toThrow(/10\.9\.9\.9|private/);
    expect(() => vetLiteralHost('10.2.0.1', allow)).toThrow('refusing to connect to 10.2.0.1: private address (not in WEBHOOK_ALLOWLIST)');
  });

  it('refuses a name when any of its addresses is forbidden', () => {
    expect(() => vetAddresses('mixed.example', ['93.184.216.34', '10.0.0.1'], EMPTY_ALLOW_LIST)).toThrow(SsrfError);
    expect(() => vetAddresses('none.example', [], EMPTY_ALLOW_LIST)).toThrow(/no address/);
  });

  it('vets what a name resolves to and hands the socket exactly those addresses', async () => {
    const fake = ((name: string, _o: unknown, cb: (e: Error | null, a: dns.LookupAddress[]) => void) => {
      cb(null, name === 'rebind.example' ? [{ address: '169.254.169.254', family: 4 }] : [{ address: '93.184.216.34', family: 4 }]);
    }) as unknown as typeof dns.lookup;
    const lookup = guardedLookup(EMPTY_ALLOW_LIST, fake);
    const run = (name: string, all: boolean) =>
      new Promise<{ err: Error | null; addresses: unknown }>((resolve) => lookup(name, { all }, (err, addresses) => resolve({ err, addresses })));
    expect(await run('good.example', true)).toEqual({ err: null, addresses: [{ address: '93.184.216.34', family: 4 }] });
    expect(await run('good.example', false)).toEqual({ err: null, addresses: '93.184.216.34' });
    // Refused as a name that does not exist is: nothing tells which names resolve to private addresses.
    const bad = await run('rebind.example', true);
    expect(bad).toEqual({ err: expect.objectContaining({ code: 'ENOTFOUND', message: 'rebind.example does not resolve to a public address' }), addresses: [] });
  });

  it('resolves `localhost` and refuses it', async () => {
    const lookup = guardedLookup(EMPTY_ALLOW_LIST);
    const err = await new Promise<Error | null>((resolve) => lookup('localhost', { all: true }, (e) => resolve(e)));
    expect(err).toMatchObject({ code: 'ENOTFOUND', message: 'localhost does not resolve to a public address' });
  });

  it('checks allow-list entries', () => {
    expect(allowListEntryProblem('127.0.0.1/32')).toBeNull();
    expect(allowListEntryProblem('hooks.local')).toBeNull();
    expect(allowListEntryProblem('[::1]')).toBeNull();
    expect(allowListEntryProblem('10.0.0.0/33')).toMatch(/not a valid CIDR/);
    expect(allowListEntryProblem('http://x/')).toMatch(/not a host name/);
  });
});
