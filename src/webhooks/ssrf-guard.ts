import dns from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The SSRF guard: a callback URL may only reach public unicast addresses. Names are resolved
 * once per connection and the socket connects to exactly the vetted addresses (a DNS answer
 * that changes between check and connect cannot slip in a private one). Refused: loopback,
 * private, link-local (169.254.169.254, the cloud metadata address, included), CGNAT,
 * unspecified, broadcast, multicast, reserved/documentation, unique-local, IPv4-mapped and
 * translated IPv6 (NAT64, 6to4, Teredo) and anything else outside 2000::/3. Decimal, octal and
 * hex IPv4 spellings never get here raw: the WHATWG URL parser turns them into dotted quads.
 * The operator's WEBHOOK_ALLOWLIST (host names, addresses, CIDRs) lets chosen targets through.
 */

export interface AllowList {
  readonly hosts: ReadonlySet<string>;
  readonly ranges: readonly [ipaddr.IPv4 | ipaddr.IPv6, number][];
}

export class SsrfError extends Error {
  readonly code = 'ERR_WEBHOOK_SSRF';
  constructor(message: string) {
    super(message);
    this.name = 'SsrfError';
  }
}

export const EMPTY_ALLOW_LIST: AllowList = { hosts: new Set(), ranges: [] };

/** Parses allow-list entries: `host.name`, `10.1.2.3`, `::1`, `10.0.0.0/8`, `fd00::/8`. */
export function parseAllowList(entries: readonly string[]): AllowList {
  const hosts = new Set<string>();
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
    if (entry === '') continue;
    const problem = allowListEntryProblem(entry);
    if (problem !== null) throw new Error(problem);
    if (entry.includes('/')) ranges.push(ipaddr.parseCIDR(entry));
    else if (ipaddr.isValid(entry) && isIP(entry) !== 0) {
      const addr = ipaddr.parse(entry);
      ranges.push([addr, addr.kind() === 'ipv4' ? 32 : 128]);
    } else hosts.add(entry.replace(/\.$/, ''));
  }
  return { hosts, ranges };
}

/** Why an allow-list entry is not a host name, an address or a CIDR; null when it is one. */
export function allowListEntryProblem(entry: string): string | null {
  const e = entry.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (/^[0-9a-f:.]+\/\d+$/.test(e)) {
    try {
      ipaddr.parseCIDR(e);
      return null;
    } catch {
      return `"${entry}" is not a valid CIDR (e.g. 127.0.0.1/32 or fd00::/8)`;
    }
  }
  if (isIP(e) !== 0) return null;
  return /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/.test(e) ? null : `"${entry}" is not a host name, an IP address or a CIDR`;
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** Why an address may not be reached (its range name), or null for a public unicast address. */
export function forbiddenRange(address: string): string | null {
  const text = address.replace(/^\[(.*)\]$/, '$1');
  if (isIP(text) === 0) return 'not an IP address';
  const addr = ipaddr.parse(text);
  const range = addr.range();
  if (range !== 'unicast') return range;
  if (addr.kind() === 'ipv6' && !addr.match(GLOBAL_UNICAST_V6)) return 'outside the global unicast range 2000::/3';
  return null;
}

function inAllowedRange(address: string, allow: AllowList): boolean {
  if (allow.ranges.length === 0) return false;
  const addr = ipaddr.parse(address);
  return allow.ranges.some(([net, bits]) => addr.kind() === net.kind() && addr.match(net, bits));
}

/** Throws SsrfError unless every address of `host` may be reached. */
export function vetAddresses(host: string, addresses: readonly string[], allow: AllowList): void {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (allow.hosts.has(name)) return;
  if (addresses.length === 0) throw new SsrfError(`${host} has no address`);
  for (const address of addresses) {
    if (inAllowedRange(address, allow)) continue;
    const range = forbiddenRange(address);
    if (range !== null) {
      // The tenant reads this in its attempts: a name's address (and its range) is not told, or
      // any tenant could look up the server's internal names through its callback URLs.
      const what = isIP(name) !== 0 ? `${address}: ${range} address` : `${host}: it resolves to an address that is not public`;
      throw new SsrfError(`refusing to connect to ${what} (not in WEBHOOK_ALLOWLIST)`);
    }
  }
}

/** Vets an IP-literal host before connecting (names are vetted by `guardedLookup`). */
export function vetLiteralHost(host: string, allow: AllowList): void {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bare) !== 0) vetAddresses(host, [bare], allow);
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** Resolver answers that a name has no address. */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'EAI_NONAME', 'EAI_NODATA', 'EAI_FAIL']);

/**
 * A name that has no address, and a name whose address is forbidden, fail alike (a `dns` error
 * saying the name does not resolve to a public address): told apart, a tenant could find out
 * through its callback URLs' attempts which names exist on the server's network.
 */
function notPublic(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${hostname} does not resolve to a public address`), { code: 'ENOTFOUND' });
}

/**
 * A `lookup` for net/tls.connect: resolves, refuses the whole name if any address is
 * forbidden, and hands the socket exactly the addresses it vetted.
 */
export function guardedLookup(allow: AllowList, resolve: typeof dns.lookup = dns.lookup) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { all: true, family: options.family ?? 0, ...(options.hints !== undefined ? { hints: options.hints } : {}) }, (err, addresses) => {
      if (err !== null) return callback(NO_SUCH_NAME.has(err.code ?? '') && isIP(hostname) === 0 ? notPublic(hostname) : err, []);
      try {
        vetAddresses(hostname, addresses.map((a) => a.address), allow);
      } catch (e) {
        return callback(isIP(hostname) === 0 ? notPublic(hostname) : (e as NodeJS.ErrnoException), []);
      }
      if (options.all === true) return callback(null, addresses);
      const first = addresses[0] as dns.LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}
