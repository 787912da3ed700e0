import { describe, it, expect, beforeEach } from 'vitest';
import {
  PLATFORMS,
  UA_CACHE_SIZE,
  clearUserAgentCache,
  normalizePlatform,
  parseUserAgent,
  userAgentCacheSize,
} from '../../../src/events/enrich/user-agent.js';

type Case = readonly [label: string, ua: string, client: string, platform: string];

const EMAIL_CLIENTS: readonly Case[] = [
  ['Gmail image proxy', 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', 'Gmail Image Proxy', 'Other'],
  ['Yahoo proxy', 'YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html', 'Yahoo Mail Proxy', 'Other'],
  ['Apple Mail macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)', 'Apple Mail', 'macOS'],
  ['Apple Mail iPhone', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148', 'Apple Mail', 'iOS'],
  ['Apple Mail iPad', 'Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148', 'Apple Mail', 'iOS'],
  ['Outlook desktop', 'Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17029; Pro)', 'Outlook', 'Windows'],
  ['Outlook (Trident, ms-office)', 'Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; .NET4.0C; .NET4.0E; Microsoft Outlook 16.0.5266; ms-office; MSOffice 16)', 'Outlook', 'Windows'],
  ['Outlook ms-office without OS', 'Mozilla/4.0 (compatible; ms-office; MSOffice 16)', 'Outlook', 'Windows'],
  ['Outlook iOS', 'Outlook-iOS/709.2226530.prod.iphone (3.24.1)', 'Outlook', 'iOS'],
  ['Outlook Android', 'Outlook-Android/2.0', 'Outlook', 'Android'],
  ['Thunderbird Linux', 'Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.5.0', 'Thunderbird', 'Linux'],
  ['Thunderbird Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:115.0) Gecko/20100101 Thunderbird/115.5.0', 'Thunderbird', 'Windows'],
  ['Thunderbird macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:115.0) Gecko/20100101 Thunderbird/115.5.0', 'Thunderbird', 'macOS'],
  ['List-Unsubscribe', 'List-Unsubscribe', 'List-Unsubscribe', 'Other'],
];

const BROWSERS: readonly Case[] = [
  ['Safari macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15', 'Safari', 'macOS'],
  ['Safari iPhone', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1', 'Safari', 'iOS'],
  ['Chrome Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36', 'Chrome', 'Windows'],
  ['Chrome macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36', 'Chrome', 'macOS'],
  ['Chrome iOS', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/119.0.6045.169 Mobile/15E148 Safari/604.1', 'Chrome', 'iOS'],
  ['Chrome Android', 'Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Mobile Safari/537.36', 'Chrome', 'Android'],
  ['Chrome OS', 'Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36', 'Chrome', 'Chrome OS'],
  ['Chrome Linux', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36', 'Chrome', 'Linux'],
  ['Firefox Linux', 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0', 'Firefox', 'Linux'],
  ['Firefox Ubuntu', 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0', 'Firefox', 'Linux'],
  ['Firefox Fedora', 'Mozilla/5.0 (X11; Fedora; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0', 'Firefox', 'Linux'],
  ['Firefox Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:120.0) Gecko/20100101 Firefox/120.0', 'Firefox', 'Windows'],
  ['Samsung Internet', 'Mozilla/5.0 (Linux; Android 13; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36', 'Samsung Internet', 'Android'],
  ['Edge Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36 Edg/119.0.2151.72', 'Edge', 'Windows'],
  ['Edge macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36 Edg/119.0.2151.72', 'Edge', 'macOS'],
];

describe('parseUserAgent', () => {
  beforeEach(() => clearUserAgentCache());

  describe('email clients (rule table first)', () => {
    it.each(EMAIL_CLIENTS)('%s', (_label, ua, client, platform) => {
      expect(parseUserAgent(ua)).toEqual({ client, platform });
    });
  });

  describe('browsers (ua-parser-js)', () => {
    it.each(BROWSERS)('%s', (_label, ua, client, platform) => {
      expect(parseUserAgent(ua)).toEqual({ client, platform });
    });
  });

  it('never throws and returns Other/Other for empty or garbage input', () => {
    for (const ua of ['', '   ', 'asdf qwerty', '\u0000\uffff', '()()()', 'Mozilla/5.0', 'x'.repeat(5000)]) {
      expect(parseUserAgent(ua)).toEqual({ platform: 'Other', client: 'Other' });
    }
    expect(parseUserAgent(undefined as unknown as string)).toEqual({ platform: 'Other', client: 'Other' });
  });

  it('only returns platforms from the stable set', () => {
    for (const [, ua] of [...EMAIL_CLIENTS, ...BROWSERS]) {
      expect(PLATFORMS).toContain(parseUserAgent(ua).platform);
    }
  });

  it('does not mistake Safari-less Android WebViews or Gmail proxy for Apple Mail', () => {
    const android = parseUserAgent(
      'Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Mobile',
    );
    expect(android.client).not.toBe('Apple Mail');
    expect(android.platform).toBe('Android');
  });

  it('memoizes results and bounds the cache', () => {
    const ua = BROWSERS[0]?.[1] ?? '';
    const first = parseUserAgent(ua);
    expect(parseUserAgent(ua)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(userAgentCacheSize()).toBe(1);
    for (let i = 0; i < UA_CACHE_SIZE + 10; i++) parseUserAgent(`bot-${i}`);
    expect(userAgentCacheSize()).toBeLessThanOrEqual(UA_CACHE_SIZE);
    expect(parseUserAgent(ua)).toEqual(first);
  });
});

describe('normalizePlatform', () => {
  it.each([
    ['Windows', 'Windows'],
    ['Windows Phone', 'Windows'],
    ['Mac OS', 'macOS'],
    ['iOS', 'iOS'],
    ['Android', 'Android'],
    ['Chromium OS', 'Chrome OS'],
    ['Linux', 'Linux'],
    ['Ubuntu', 'Linux'],
    ['Debian', 'Linux'],
    ['Fedora', 'Linux'],
    ['Arch', 'Linux'],
    ['FreeBSD', 'Other'],
    ['BlackBerry', 'Other'],
    ['', 'Other'],
    [undefined, 'Other'],
  ] as const)('%s → %s', (os, expected) => {
    expect(normalizePlatform(os)).toBe(expected);
  });
});
