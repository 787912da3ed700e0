/**
 * Looks at JSON text without parsing it: what a parser's value cannot tell (how deep the text
 * nests before a recursive parse meets it, where each element of an array starts and ends, how
 * large its numbers' exponents are, whether a key found by a search is the top level's).
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const PLUS = 0x2b;
const MINUS = 0x2d;

/** Where the string opening at `at` ends: its closing quote (not escaped by an odd run of backslashes), or -1. */
function stringEnd(text: string, at: number): number {
  let i = at;
  for (;;) {
    i = text.indexOf('"', i + 1);
    if (i < 0) return -1;
    let k = i - 1;
    while (text.charCodeAt(k) === BACKSLASH) k--;
    if ((i - 1 - k) % 2 === 0) return i;
  }
}

/** True when arrays and objects nest more than `max` deep (unterminated text: false, the parser refuses it). */
export function nestedDeeperThan(text: string, max: number): boolean {
  return scanNumbersAndDepth(text, max).deeper;
}

/**
 * The texts of the elements of a JSON array, whitespace around them left out. `text` must be
 * valid JSON whose top level is an array (JSON.parse said so): then a comma or bracket at depth
 * one, outside a string, ends an element.
 */
export function splitJsonArray(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (depth === 1 && start < 0 && !WHITESPACE.has(c) && c !== CLOSE_BRACKET) start = i;
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) break; // unterminated: not the valid JSON this takes
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) depth++;
    else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      if (--depth === 0 && start >= 0) out.push(text.slice(start, i).trim());
    } else if (depth === 1 && c === COMMA) {
      out.push(text.slice(start, i).trim());
      start = -1;
    }
  }
  return out;
}

/** What `scanNumbersAndDepth` found in JSON text. */
export interface JsonTextShape {
  /** Arrays and objects nest deeper than the `maxDepth` asked about. */
  deeper: boolean;
  /** The largest exponent magnitude of a number (outside strings). */
  maxExponent: number;
  /** All the numbers' exponent magnitudes added up. */
  exponentSum: number;
}

/**
 * One pass over JSON text, strings skipped: how deep it nests (stopping at `maxDepth` + 1) and
 * how large its numbers' exponents are, which a decimal type that keeps every digit (Postgres's
 * jsonb) writes out as that many digits. Outside strings an `e` after a digit can only start an
 * exponent (`true` and `false` have theirs after letters).
 */
export function scanNumbersAndDepth(text: string, maxDepth: number): JsonTextShape {
  let depth = 0;
  let maxExponent = 0;
  let exponentSum = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) break;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > maxDepth) return { deeper: true, maxExponent, exponentSum };
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
    else if ((c === LOWER_E || c === UPPER_E) && i > 0) {
      const before = text.charCodeAt(i - 1);
      if (before < DIGIT_0 || before > DIGIT_9) continue;
      let j = i + 1;
      if (text.charCodeAt(j) === PLUS || text.charCodeAt(j) === MINUS) j++;
      let magnitude = 0;
      for (; j < text.length; j++) {
        const d = text.charCodeAt(j);
        if (d < DIGIT_0 || d > DIGIT_9) break;
        // Past a billion it is only "too large"; stop counting there.
        if (magnitude < 1e9) magnitude = magnitude * 10 + (d - DIGIT_0);
      }
      if (magnitude > maxExponent) maxExponent = magnitude;
      exponentSum += magnitude;
      i = j - 1;
    }
  }
  return { deeper: false, maxExponent, exponentSum };
}

/**
 * Whether the quote at `at` opens a key of the top-level object: not inside a string, at depth
 * one. (A needle such as `"MessageID"` found by indexOf may sit inside another string, or be a
 * nested object's key.)
 */
export function isTopLevelKeyAt(text: string, at: number): boolean {
  let depth = 0;
  for (let i = 0; i < at; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0 || i >= at) return false;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) depth++;
    else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return depth === 1 && text.charCodeAt(at) === QUOTE;
}

/**
 * A printable ASCII character written as an escape (`\\u0049` for `I`, `\\u005f` for `_`): no
 * producer needs one, but a key spelled so names the same key as its plain spelling, which a
 * plain text search cannot see. Left out: the characters encoders escape on their own (`"`, `\\`,
 * `/`, and `<`, `>`, `&`, `'` for HTML), which keep an event on the fast paths.
 */
const ESCAPED_KEY_CHARACTER = /\\u00(?:2[013-589a-e]|3[0-9abdf]|4[0-9a-f]|5[0-9abd-f]|6[0-9a-f]|7[0-9a-e])/i;

/**
 * Whether a key of the top-level object is spelled with an {@link ESCAPED_KEY_CHARACTER}
 * (`text` is JSON that parsed). Such a character anywhere else (a string value, a nested key)
 * does not hide a top-level key from a text search, and leaves the event on its fast paths.
 */
export function hasEscapedTopLevelKey(text: string): boolean {
  if (!ESCAPED_KEY_CHARACTER.test(text)) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end < 0) return true; // unterminated: not the valid JSON this takes; the parser decides
      if (depth === 1 && ESCAPED_KEY_CHARACTER.test(text.slice(i, end + 1)) && isFollowedByColon(text, end + 1)) return true;
      i = end;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) depth++;
    else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/** Whether the first character from `at` on that is not whitespace is a colon: the string before it was a key. */
function isFollowedByColon(text: string, at: number): boolean {
  let i = at;
  while (i < text.length && WHITESPACE.has(text.charCodeAt(i))) i++;
  return text.charCodeAt(i) === COLON;
}
