import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { normalizeQuery, normalizeUrl } from '../../../src/events/enrich/links.js';

describe('normalizeUrl', () => {
  it('lower-cases scheme and host but keeps path case', () => {
    expect(normalizeUrl('HTTPS://Example.COM/Some/Path')).toBe('https://example.com/Some/Path');
  });

  it('trims surrounding whitespace', () => {
    expect(normalizeUrl('  https://example.com/a  \n')).toBe('https://example.com/a');
  });

  it('drops default ports but keeps others', () => {
    expect(normalizeUrl('http://example.com:80/a')).toBe('http://example.com/a');
    expect(normalizeUrl('https://example.com:443/a')).toBe('https://example.com/a');
    expect(normalizeUrl('https://example.com:8443/a')).toBe('https://example.com:8443/a');
  });

  it('drops the fragment', () => {
    expect(normalizeUrl('https://example.com/a#section-2')).toBe('https://example.com/a');
    expect(normalizeUrl('https://example.com/a?x=1#')).toBe('https://example.com/a?x=1');
    expect(normalizeUrl('https://example.com/a?x=1#frag?utm_source=y&b=2')).toBe('https://example.com/a?x=1');
    expect(normalizeUrl('https://example.com/a#?z=1')).toBe('https://example.com/a');
  });

  it('removes tracking parameters', () => {
    expect(
      normalizeUrl(
        'https://shop.example.com/p?id=42&utm_source=newsletter&utm_medium=email&utm_campaign=nov&gclid=abc&fbclid=def&mc_cid=1&mc_eid=2&_hsenc=x&_hsmi=y',
      ),
    ).toBe('https://shop.example.com/p?id=42');
    expect(normalizeUrl('https://example.com/?UTM_Source=x&a=1')).toBe('https://example.com/?a=1');
    expect(normalizeUrl('https://example.com/?utm%5Fsource=x&a=1')).toBe('https://example.com/?a=1');
  });

  it('keeps look-alike parameters that are not tracking ones', () => {
    expect(normalizeUrl('https://example.com/?gclidx=1&my_utm=2')).toBe('https://example.com/?gclidx=1&my_utm=2');
  });

  it('sorts remaining parameters stably by key', () => {
    expect(normalizeUrl('https://example.com/s?z=1&a=2&m=3')).toBe('https://example.com/s?a=2&m=3&z=1');
    expect(normalizeUrl('https://example.com/s?b=2&a=x&b=1&a=y')).toBe('https://example.com/s?a=x&a=y&b=2&b=1');
  });

  it('preserves the original encoding of kept parameters', () => {
    expect(normalizeUrl('https://example.com/?q=a%20b&flag&p=c+d')).toBe('https://example.com/?flag&p=c+d&q=a%20b');
  });

  it('removes a lone or emptied query', () => {
    expect(normalizeUrl('https://example.com/a?')).toBe('https://example.com/a');
    expect(normalizeUrl('https://example.com/a?#top')).toBe('https://example.com/a');
    expect(normalizeUrl('https://example.com/a?utm_source=x')).toBe('https://example.com/a');
    expect(normalizeUrl('https://example.com/a?&&')).toBe('https://example.com/a');
  });

  it('adds the root path to bare origins (WHATWG serialisation)', () => {
    expect(normalizeUrl('https://Example.com')).toBe('https://example.com/');
  });

  it('handles non-http absolute URLs', () => {
    expect(normalizeUrl('mailto:Someone@Example.com?subject=Hi&utm_source=x')).toBe(
      'mailto:Someone@Example.com?subject=Hi',
    );
    expect(normalizeUrl('tel:+33123456789')).toBe('tel:+33123456789');
  });

  it('returns trimmed input unchanged when it is not an absolute URL', () => {
    expect(normalizeUrl('  www.example.com/Path?utm_source=x ')).toBe('www.example.com/Path?utm_source=x');
    expect(normalizeUrl('/relative/path')).toBe('/relative/path');
    expect(normalizeUrl('')).toBe('');
    expect(normalizeUrl('http://')).toBe('http://');
    expect(normalizeUrl('not a url')).toBe('not a url');
  });

  it('is deterministic and idempotent', () => {
    fc.assert(
      fc.property(fc.webUrl({ withQueryParameters: true, withFragments: true }), (url) => {
        const once = normalizeUrl(url);
        expect(normalizeUrl(url)).toBe(once);
        expect(normalizeUrl(once)).toBe(once);
      }),
      { numRuns: 300 },
    );
  });
});

describe('normalizeQuery', () => {
  it('filters and sorts raw segments', () => {
    expect(normalizeQuery('')).toBe('');
    expect(normalizeQuery('b=1&utm_term=x&a')).toBe('a&b=1');
    expect(normalizeQuery('bad%ZZ=1&a=2')).toBe('a=2&bad%ZZ=1');
    expect(normalizeQuery('c=3&b=2&a=1&b=0&utm_x=1&a=0')).toBe('a=1&a=0&b=2&b=0&c=3');
    expect(normalizeQuery('a=1&b=2')).toBe('a=1&b=2');
  });
});
