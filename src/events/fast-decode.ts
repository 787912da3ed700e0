import { stringifyExactJson } from './exact-json.js';
import { type CheckedEvent, type DecodeContext, type LogEventRow, toLogRow } from './log-row.js';
import { type EventType, INT64_MAX, MAX_UNIX_SECONDS, UINT64_MAX, isEmailAddress } from './schema.js';
import { SUSPECT_ESCAPE } from './storable.js';
import { hasEscapedTopLevelKey, isTopLevelKeyAt } from './json-text.js';

/**
 * The fast path of decoding: the contract checked by hand for the common shapes of valid events,
 * with no intermediate objects. It only ever accepts: anything it is unsure of (every invalid
 * event, campaign events, nested values, 64-bit numbers other than a bare MessageID, ids with
 * leading zeros…) returns null and goes to the zod schema, which decides and words the reason.
 * test/unit/events/fast-decode.test.ts checks that whatever it accepts, zod accepts as the
 * same row.
 */

type Limits = readonly (readonly [field: string, max: number])[];

interface Shape {
  /** Optional string fields with their maximum length, besides the common ones. */
  strings: Limits;
  tracking: boolean;
  url: boolean;
  bounce: boolean;
  failure: boolean;
  known: ReadonlySet<string>;
}

const COMMON: Limits = [['sender', 320], ['Message_GUID', 128], ['customcampaign', 255], ['CustomID', 255], ['Payload', 65_536]];
const TRACKING: Limits = [['ip', 64], ['geo', 8], ['agent', 2048]];
const FAILURE: Limits = [['error_related_to', 64], ['error', 255]];
const REF_IDS = ['mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id'] as const;
const BASE_FIELDS = ['event', 'time', 'MessageID', 'email', 'EventID', 'APIKeyID', ...REF_IDS];

function shape(own: Limits, flags: { tracking?: true; url?: true; bounce?: true; failure?: true } = {}): Shape {
  const strings = [...COMMON, ...(flags.tracking ? TRACKING : []), ...(flags.failure ? FAILURE : []), ...own];
  const extra = [...(flags.url ? ['url'] : []), ...(flags.bounce ? ['blocked', 'hard_bounce'] : [])];
  return {
    strings,
    tracking: flags.tracking === true,
    url: flags.url === true,
    bounce: flags.bounce === true,
    failure: flags.failure === true,
    known: new Set([...BASE_FIELDS, ...strings.map(([f]) => f), ...extra]),
  };
}

/** Every type of the contract but `campaign` (rare, and shaped differently: zod checks it). */
const SHAPES: ReadonlyMap<string, Shape> = new Map<EventType, Shape>([
  ['sent', shape([['mj_message_id', 32], ['smtp_reply', 2048]])],
  ['open', shape([], { tracking: true })],
  ['click', shape([], { tracking: true, url: true })],
  ['bounce', shape([['comment', 8192]], { failure: true, bounce: true })],
  ['blocked', shape([], { failure: true })],
  ['spam', shape([['source', 255]])],
  ['unsub', shape([], { tracking: true })],
  ['queued', shape([])],
  ['deferred', shape([['smtp_reply', 2048]], { failure: true })],
]);

const UINT64_DIGITS = UINT64_MAX.toString();
const INT64_DIGITS = INT64_MAX.toString();
const URL_MAX = 8192;
const MESSAGE_ID_KEY = '"MessageID"';

/** An event's JSON text → its row, or null when the zod path must decide. */
export function fastDecodeText(text: string, ctx: DecodeContext): LogEventRow | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return fastDecodeValue(value, ctx, text);
}

/**
 * A parsed event → its row, or null. With `text` (the JSON it was parsed from by JSON.parse), a
 * MessageID above 2^53 is read back exactly from it; without, the payload is written anew.
 */
export function fastDecodeValue(value: unknown, ctx: DecodeContext, text?: string): LogEventRow | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const o = value as Record<string, unknown>;
  const event = o['event'];
  const s = typeof event === 'string' ? SHAPES.get(event) : undefined;
  if (s === undefined || (ctx.subjectEvent !== undefined && ctx.subjectEvent !== event)) return null;

  const time = o['time'];
  if (typeof time !== 'number' || !Number.isSafeInteger(time) || time < 0 || time > MAX_UNIX_SECONDS) return null;
  const email = o['email'];
  if (typeof email !== 'string' || !isEmailAddress(email)) return null;
  const eventId = o['EventID'];
  if (eventId !== undefined && (typeof eventId !== 'string' || eventId.length === 0 || eventId.length > 128)) return null;
  const apiKeyId = optionalId(o['APIKeyID'], INT64_DIGITS);
  if (apiKeyId === null || (apiKeyId !== undefined && apiKeyId !== ctx.apiKeyId)) return null;
  const campaign = optionalId(o['mj_campaign_id'], INT64_DIGITS);
  const contact = optionalId(o['mj_contact_id'], INT64_DIGITS);
  const list = optionalId(o['mj_list_id'], INT64_DIGITS);
  const sender = optionalId(o['mj_sender_id'], INT64_DIGITS);
  if (campaign === null || contact === null || list === null || sender === null) return null;
  for (const [field, max] of s.strings) {
    const v = o[field];
    if (v !== undefined && (typeof v !== 'string' || v.length > max)) return null;
  }
  const url = o['url'];
  if (s.url && (typeof url !== 'string' || url.length > URL_MAX)) return null;
  const hardBounce = o['hard_bounce'];
  const blocked = o['blocked'];
  if (s.bounce && ((hardBounce !== undefined && typeof hardBounce !== 'boolean') || (blocked !== undefined && typeof blocked !== 'boolean'))) return null;
  if (!onlyPlainExtras(o, s.known)) return null;

  // MessageID last: a bare one above 2^53 is read back from the text, once the rest is known good.
  const rawMessageId = o['MessageID'];
  let messageId = requiredId(rawMessageId, UINT64_DIGITS);
  let exact = false;
  if (messageId === null && text !== undefined && typeof rawMessageId === 'number' && Number.isInteger(rawMessageId) && rawMessageId > 0) {
    messageId = exactTopLevelDigits(text, MESSAGE_ID_KEY, rawMessageId, UINT64_DIGITS);
    exact = true;
  }
  if (messageId === null) return null;

  const payload = text ?? stringifyExactJson(o);
  // U+0000 or a surrogate escape: the zod path decides whether it can be stored.
  if (payload.includes('\\u') && SUSPECT_ESCAPE.test(payload)) return null;

  const checked: CheckedEvent = {
    event: event as EventType,
    time,
    MessageID: messageId,
    email,
    EventID: eventId,
    mj_campaign_id: campaign,
    mj_contact_id: contact,
    mj_list_id: list,
    mj_sender_id: sender,
    sender: o['sender'] as string | undefined,
    customcampaign: o['customcampaign'] as string | undefined,
    url: s.url ? (url as string) : undefined,
    agent: s.tracking ? (o['agent'] as string | undefined) : undefined,
    geo: s.tracking ? (o['geo'] as string | undefined) : undefined,
    hard_bounce: s.bounce ? (hardBounce as boolean | undefined) : undefined,
    blocked: s.bounce ? (blocked as boolean | undefined) : undefined,
    // As the schema path: failure fields count only when `error` itself is there.
    failure: s.failure && o['error'] !== undefined,
    error_related_to: s.failure ? (o['error_related_to'] as string | undefined) : undefined,
    error: s.failure ? (o['error'] as string | undefined) : undefined,
  };
  // The raw event an EventID is derived from holds the exact MessageID, as parseExactJson's would.
  const raw = exact && eventId === undefined ? { ...o, MessageID: BigInt(messageId) } : o;
  return toLogRow(checked, raw, ctx, payload);
}

/** Unknown fields are kept in the payload, but only flat ones with no 64-bit number stay on the fast path. */
function onlyPlainExtras(o: Record<string, unknown>, known: ReadonlySet<string>): boolean {
  for (const key in o) {
    if (known.has(key)) continue;
    const v = o[key];
    if (typeof v === 'object' ? v !== null : typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v))) return false;
  }
  return true;
}

/** A 64-bit id in its usual spellings → decimal string; null when unsure. */
function requiredId(v: unknown, maxDigits: string): string | null {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? String(v) : null;
  if (typeof v === 'string') return canonicalDigits(v, 0, v.length, maxDigits) ? v : null;
  if (typeof v === 'bigint') return v >= 0n && v <= BigInt(maxDigits) ? v.toString() : null;
  return null;
}

/** As requiredId; absent or null means none (undefined). */
function optionalId(v: unknown, maxDigits: string): string | undefined | null {
  return v === undefined || v === null ? undefined : requiredId(v, maxDigits);
}

/** `text[from, to)` is 1–20 digits, without a leading zero, at most `maxDigits`. */
function canonicalDigits(text: string, from: number, to: number, maxDigits: string): boolean {
  const n = to - from;
  if (n < 1 || n > maxDigits.length) return false;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  if (n > 1 && text.charCodeAt(from) === 48) return false;
  return n < maxDigits.length || text.slice(from, to) <= maxDigits;
}

const isJsonSpace = (c: number): boolean => c === 32 || c === 9 || c === 10 || c === 13;

/**
 * The digits of a top-level `"key": digits` (`needle` is the quoted key) that JSON.parse rounded, read from the text exactly
 * as parseExactJson does (the key spelled once, a bare integer within 64 characters after it).
 */
function exactTopLevelDigits(text: string, needle: string, rounded: number, maxDigits: string): string | null {
  const at = text.indexOf(needle);
  if (at < 0 || text.indexOf(needle, at + needle.length) >= 0) return null;
  // A key spelled with escapes (`Message\u0049D`) is the parser's, not this needle's: the exact path decides.
  if (hasEscapedTopLevelKey(text) || !isTopLevelKeyAt(text, at)) return null;
  const windowEnd = Math.min(text.length, at + needle.length + 64);
  let i = at + needle.length;
  while (i < windowEnd && isJsonSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 58 /* : */) return null;
  i++;
  while (i < windowEnd && isJsonSpace(text.charCodeAt(i))) i++;
  const start = i;
  while (i < windowEnd && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
  const end = i;
  while (i < windowEnd && isJsonSpace(text.charCodeAt(i))) i++;
  const close = text.charCodeAt(i);
  if (i >= windowEnd || (close !== 44 /* , */ && close !== 125 /* } */)) return null;
  if (!canonicalDigits(text, start, end, maxDigits)) return null;
  const digits = text.slice(start, end);
  return Number(digits) === rounded ? digits : null;
}
