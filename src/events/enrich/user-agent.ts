/**
 * User-agent → { platform, client } in the vocabulary of Mailjet's
 * useragentstatistics (`Platform`, `UserAgent`).
 *
 * Email-client detection runs first with a small rule table (generic parsers
 * misreport proxies and mail apps); browsers and OSes fall back to ua-parser-js.
 * Results are memoized in a bounded Map that is cleared when full.
 */
import UAParser from 'ua-parser-js';

export interface UserAgentInfo {
  platform: string;
  client: string;
}

/** Platform / client used when nothing can be determined. */
const UA_OTHER = 'Other';

/** Every platform {@link parseUserAgent} can return. */
export const PLATFORMS: readonly string[] = Object.freeze([
  'Windows', 'macOS', 'iOS', 'Android', 'Linux', 'Chrome OS', UA_OTHER,
]);

interface ClientRule {
  readonly match: RegExp;
  /** Rule does not apply when this also matches. */
  readonly unless?: RegExp;
  readonly client: string;
  /** Fixed platform; when absent the platform comes from the OS in the UA. */
  readonly platform?: string;
  /** Platform to use when it is derived but the OS is not recognised. */
  readonly fallbackPlatform?: string;
}

/** Ordered: first match wins. */
const CLIENT_RULES: readonly ClientRule[] = [
  // Image-fetching proxies: the UA says nothing about the reader's device.
  { match: /GoogleImageProxy/i, client: 'Gmail Image Proxy', platform: UA_OTHER },
  { match: /YahooMailProxy/i, client: 'Yahoo Mail Proxy', platform: UA_OTHER },
  // Mailjet reports header (RFC 8058) unsubscribes with this agent.
  { match: /^\s*List-Unsubscribe\s*$/i, client: 'List-Unsubscribe', platform: UA_OTHER },
  { match: /Outlook-iOS/i, client: 'Outlook', platform: 'iOS' },
  { match: /Outlook-Android/i, client: 'Outlook', platform: 'Android' },
  // Outlook desktop / Office: "Microsoft Office/16.0 (...; Microsoft Outlook ...)",
  // "... ms-office; MSOffice 16)". ms-office agents are Windows-only.
  {
    match: /Microsoft Outlook|\bms-office\b|\bMSOffice\b/i,
    client: 'Outlook',
    fallbackPlatform: 'Windows',
  },
  { match: /\bThunderbird\//i, client: 'Thunderbird' },
  // Apple Mail (macOS, iOS, iPadOS): an Apple WebKit UA with no browser token
  // (no Version/, Safari/ or third-party browser marker).
  {
    match: /\((?:Macintosh|iPhone|iPad|iPod)\b.*\bAppleWebKit\//,
    unless: /\b(?:Version|Safari|Chrome|CriOS|FxiOS|EdgiOS|Edg|OPR|OPiOS|Firefox|GSA|YaBrowser)\//,
    client: 'Apple Mail',
  },
];

const LINUX_OS_RE =
  /^(?:linux|gnu|[kxl]?ubuntu|debian|suse|opensuse|gentoo|arch|slackware|fedora|mandriva|centos|pclinuxos|red ?hat|zenwalk|linpus|raspbian|deepin|manjaro|elementary os|sabayon|linspire|mint|mageia|vectorlinux)$/i;
const MOBILE_PREFIX_RE = /^Mobile /;

/** Map ua-parser-js OS names onto the small stable platform set. */
export function normalizePlatform(osName: string | undefined): string {
  if (osName === undefined || osName === '') return UA_OTHER;
  switch (osName) {
    case 'Mac OS':
    case 'macOS':
      return 'macOS';
    case 'iOS':
    case 'iPadOS':
      return 'iOS';
    case 'Android':
    case 'Android-x86':
      return 'Android';
    case 'Chromium OS':
    case 'Chrome OS':
      return 'Chrome OS';
    default:
      if (osName.startsWith('Windows')) return 'Windows';
      return LINUX_OS_RE.test(osName) ? 'Linux' : UA_OTHER;
  }
}

/** Browser names as reported by ua-parser-js, minus the "Mobile " prefix. */
function normalizeClient(browserName: string | undefined): string {
  if (browserName === undefined || browserName === '') return UA_OTHER;
  return browserName.replace(MOBILE_PREFIX_RE, '');
}

const parser = new UAParser();

function osPlatform(ua: string): string {
  return normalizePlatform(parser.setUA(ua).getOS().name);
}

function classify(ua: string): UserAgentInfo {
  if (ua.trim() === '') return { platform: UA_OTHER, client: UA_OTHER };
  for (const rule of CLIENT_RULES) {
    if (!rule.match.test(ua)) continue;
    if (rule.unless !== undefined && rule.unless.test(ua)) continue;
    let platform = rule.platform ?? osPlatform(ua);
    if (platform === UA_OTHER && rule.fallbackPlatform !== undefined) platform = rule.fallbackPlatform;
    return { platform, client: rule.client };
  }
  parser.setUA(ua);
  return {
    platform: normalizePlatform(parser.getOS().name),
    client: normalizeClient(parser.getBrowser().name),
  };
}

/** Maximum number of memoized user agents; the cache is cleared when it is reached. */
export const UA_CACHE_SIZE = 10_000;
const MAX_UA_LENGTH = 512;
const cache = new Map<string, UserAgentInfo>();
const EMPTY: UserAgentInfo = Object.freeze({ platform: UA_OTHER, client: UA_OTHER });

/**
 * Parse a user agent into Mailjet's `Platform` / `UserAgent` pair.
 * Never throws; unknown input gives `{ platform: 'Other', client: 'Other' }`.
 * Returned objects are shared and frozen: do not mutate them.
 */
export function parseUserAgent(raw: string): UserAgentInfo {
  if (typeof raw !== 'string' || raw === '') return EMPTY;
  // Bound key size (ua-parser-js itself only looks at the first 500 characters).
  const ua = raw.length > MAX_UA_LENGTH ? raw.slice(0, MAX_UA_LENGTH) : raw;
  const hit = cache.get(ua);
  if (hit !== undefined) return hit;
  let info: UserAgentInfo;
  try {
    info = Object.freeze(classify(ua));
  } catch {
    info = EMPTY;
  }
  if (cache.size >= UA_CACHE_SIZE) cache.clear();
  cache.set(ua, info);
  return info;
}

/** Drop all memoized results (for tests). */
export function clearUserAgentCache(): void {
  cache.clear();
}

/** Current number of memoized user agents (for tests / metrics). */
export function userAgentCacheSize(): number {
  return cache.size;
}
