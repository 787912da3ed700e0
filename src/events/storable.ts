/** The escapes a JSON text needs for what jsonb cannot store: U+0000 and UTF-16 surrogates. */
export const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Why Postgres could not store this event (a U+0000, or a UTF-16 surrogate without its pair, in a
 * key or a string), or null. Only events whose text has such an escape are looked at closely.
 */
export function unstorableText(text: string, value: unknown): string | null {
  if (!SUSPECT_ESCAPE.test(text)) return null;
  const problem = (s: string): string | null => {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 0) return 'event contains a NUL character (\\u0000), which cannot be stored';
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++;
      else if (c >= 0xd800 && c <= 0xdfff) return `event contains a lone UTF-16 surrogate (\\u${c.toString(16)}), which cannot be stored`;
    }
    return null;
  };
  const walk = (v: unknown): string | null => {
    if (typeof v === 'string') return problem(v);
    if (v === null || typeof v !== 'object') return null;
    for (const [k, item] of Object.entries(v)) {
      const found = problem(k) ?? walk(item);
      if (found !== null) return found;
    }
    return null;
  };
  return walk(value);
}
