/**
 * The one order of text in the read models: by Unicode code point, as Postgres compares a
 * `COLLATE "C"` column of a UTF-8 database (byte by byte) and as the read API sorts. The fold
 * breaks its ties with it (EventIDs at the same second, the largest email or sender of a message,
 * one-way text columns), so the live projector and the set-based rebuild pick the same row.
 *
 * JavaScript's `<` compares UTF-16 code units instead, which puts a character beyond U+FFFF
 * (a surrogate pair, 0xD800–0xDFFF) before one of U+E000–U+FFFF. That is the only case where the
 * two orders part, so `<` decides unless both strings hold such high units.
 */
export function compareText(a: string, b: string): number {
  if (a === b) return 0;
  if (!HIGH_UNIT.test(a) || !HIGH_UNIT.test(b)) return a < b ? -1 : 1;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

const HIGH_UNIT = /[\uD800-\uFFFF]/;

/** A UTF-16 unit's place in code point order: surrogates (astral characters) after U+E000–U+FFFF. */
function codePointRank(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}
