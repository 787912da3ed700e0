import { exactJsonValue } from '../events/exact-json.js';
import { MAX_EVENT_DEPTH, TOO_DEEP } from '../events/decode.js';
import { nestedDeeperThan, splitJsonArray } from '../events/json-text.js';
import { apiErrors } from '../http/errors.js';

/** One element of a POST /v1/events body: its own text, and its value or why it has none. */
export type EventArrayItem = { readonly text: string; readonly value: unknown } | { readonly text: string; readonly error: string };

/**
 * A POST /v1/events body → its events, each with its own text. Each element is parsed on its
 * own, so what one element holds decides only its own fate (an element that lossless-json
 * refuses, such as one repeating a key beside an integer past 2^53, is that event's reject, not
 * the request's), and the log's payload is made from each event's own text, as it is for NATS
 * (exact values; as jsonb it keeps neither key order, whitespace nor repeated keys).
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
  const elements = splitJsonArray(text);
  if (elements.length !== whole.length) throw new Error(`split ${elements.length} events where JSON.parse found ${whole.length}`);
  // The whole body's parse already holds each event; only its integers past 2^53 are read again.
  return elements.map((element, i) => {
    // Checked before anything walks the value (recursively): the event's reject, as on NATS.
    if (nestedDeeperThan(element, MAX_EVENT_DEPTH)) return { text: element, error: TOO_DEEP };
    try {
      return { text: element, value: exactJsonValue(whole[i], element) };
    } catch (err) {
      return { text: element, error: `event is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
    }
  });
}
