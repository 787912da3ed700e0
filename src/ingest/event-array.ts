import { parseExactJson } from '../events/exact-json.js';
import { apiErrors } from '../http/errors.js';

/** One element of a POST /v1/events body: its own text, and its value or why it has none. */
export type EventArrayItem = { readonly text: string; readonly value: unknown } | { readonly text: string; readonly error: string };

/**
 * A POST /v1/events body → its events, each with its own text. Each element is parsed on its
 * own, so what one element holds decides only its own fate (an element that lossless-json
 * refuses, such as one repeating a key beside an integer past 2^53, is that event's reject, not
 * the request's), and the log keeps each event's text as it was sent, as it does for NATS.
 * A body that is not a JSON array of at most `maxEvents` elements is a 400.
 */
export function eventArrayItems(text: string, maxEvents: number): EventArrayItem[] {
  let whole: unknown;
  try {
    whole = JSON.parse(text);
  } catch (err) {
    throw apiErrors.badRequest(`Request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!Array.isArray(whole)) throw apiErrors.badRequest('Request body must be a JSON array of events');
  if (whole.length > maxEvents) throw apiErrors.badRequest(`Too many events: ${whole.length} in one request, at most ${maxEvents}`);
  return splitJsonArray(text).map((element) => {
    try {
      return { text: element, value: parseExactJson(element) };
    } catch (err) {
      return { text: element, error: `event is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
    }
  });
}

/**
 * The texts of the elements of a JSON array, whitespace around them left out. `text` must be
 * valid JSON whose top level is an array (JSON.parse said so): then a comma or bracket at depth
 * one, outside a string, ends an element.
 */
export function splitJsonArray(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) inString = true;
    if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      depth++;
      if (depth === 1) continue;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
      if (depth === 0 && start >= 0) out.push(text.slice(start, i).trim());
      continue;
    } else if (depth === 1 && c === COMMA) {
      out.push(text.slice(start, i).trim());
      start = -1;
      continue;
    }
    if (depth >= 1 && start < 0 && !WHITESPACE.has(c)) start = i;
  }
  return out;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
