/**
 * Click-URL normalisation so that the same link aggregates under one key.
 *
 * Pure and deterministic. The query string is filtered and sorted on its raw
 * `key=value` segments, so the original percent-encoding of kept parameters is
 * preserved (no form re-encoding of `%20` → `+`, `a` → `a=`, ...).
 */

/** Tracking parameters removed from click URLs (compared case-insensitively). */
const TRACKING_PARAM_RE = /^(?:utm_.*|gclid|fbclid|mc_cid|mc_eid|_hsenc|_hsmi)$/i;
const PLUS_RE = /\+/g;

function decodeKey(rawKey: string): string {
  if (!rawKey.includes('%') && !rawKey.includes('+')) return rawKey;
  try {
    return decodeURIComponent(rawKey.replace(PLUS_RE, ' '));
  } catch {
    return rawKey;
  }
}

/** Filter tracking parameters out of a raw query (without `?`) and sort the rest by key. */
export function normalizeQuery(query: string): string {
  if (query === '') return '';
  const keys: string[] = [];
  const raws: string[] = [];
  let sorted = true;
  for (const raw of query.split('&')) {
    if (raw === '') continue;
    const eq = raw.indexOf('=');
    const key = decodeKey(eq < 0 ? raw : raw.slice(0, eq));
    if (TRACKING_PARAM_RE.test(key)) continue;
    const prev = keys[keys.length - 1];
    if (prev !== undefined && key < prev) sorted = false;
    keys.push(key);
    raws.push(raw);
  }
  if (sorted) return raws.join('&');
  // Stable insertion sort by key in code-unit order (locale independent); queries are short.
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] ?? '';
    const raw = raws[i] ?? '';
    let j = i - 1;
    for (; j >= 0 && (keys[j] ?? '') > key; j--) {
      keys[j + 1] = keys[j] ?? '';
      raws[j + 1] = raws[j] ?? '';
    }
    keys[j + 1] = key;
    raws[j + 1] = raw;
  }
  return raws.join('&');
}

/**
 * Normalise a clicked URL: trim; lower-case scheme and host; drop default
 * ports and the fragment; remove tracking parameters (`utm_*`, `gclid`,
 * `fbclid`, `mc_cid`, `mc_eid`, `_hsenc`, `_hsmi`); sort the remaining query
 * parameters stably by key; drop an empty `?`. Path case is kept.
 * Input that is not an absolute URL is returned trimmed but otherwise unchanged.
 */
export function normalizeUrl(raw: string): string {
  const hit = cache.get(raw);
  if (hit !== undefined) return hit;
  const out = normalizeUncached(raw);
  if (raw.length <= MAX_CACHED_URL_LENGTH) {
    if (cache.size >= URL_CACHE_SIZE) cache.clear();
    cache.set(raw, out);
  }
  return out;
}

/** Bounded memo: the same campaign links are clicked by many recipients. */
const URL_CACHE_SIZE = 10_000;
const MAX_CACHED_URL_LENGTH = 512;
const cache = new Map<string, string>();

/** An absolute URL starts with a scheme (cheap pre-check so garbage never reaches `new URL`). */
const SCHEME_RE = /^[a-zA-Z][a-zA-Z0-9+.-]*:/;

function parse(input: string): URL | null {
  try {
    return new URL(input);
  } catch {
    return null;
  }
}

function normalizeUncached(raw: string): string {
  const trimmed = raw.trim();
  if (!SCHEME_RE.test(trimmed)) return trimmed;
  // The first '#' always starts the fragment, so cut it before parsing (one parse only).
  const hashAt = trimmed.indexOf('#');
  const url = parse(hashAt < 0 ? trimmed : trimmed.slice(0, hashAt));
  if (url === null) return trimmed;
  const href = url.href;
  const search = url.search;
  if (search === '') {
    // An empty query serialises as a lone trailing '?'.
    return href.endsWith('?') ? href.slice(0, -1) : href;
  }
  // Without a fragment, href ends with `search`, which is already percent-encoded.
  const query = normalizeQuery(search.slice(1));
  return href.slice(0, href.length - search.length) + (query === '' ? '' : '?' + query);
}
