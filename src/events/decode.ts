import { parseExactJson, stringifyExactJson } from './exact-json.js';
import { fastDecodeText, fastDecodeValue } from './fast-decode.js';
import { scanNumbersAndDepth } from './json-text.js';
import { type CheckedEvent, type DecodeContext, type LogEventRow, toLogRow } from './log-row.js';
import { describeIssues, rawEventSchema } from './schema.js';
import { unstorableText } from './storable.js';

/**
 * Raw event → a row for the log: validated against the contract, given its EventID, and
 * enriched once (log-row.ts). The common valid shapes take the fast path (fast-decode.ts); the
 * zod schema decides everything else and words every reason.
 */
export type { DecodeContext, LogEventRow } from './log-row.js';

export type DecodeResult = { ok: true; row: LogEventRow } | { ok: false; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The most an event's JSON may take, as NATS's default `max_payload` allows one message: a larger
 * event is refused on every path (HTTP, import, NATS with a raised limit) rather than kept in the
 * append-only log for good.
 */
export const MAX_EVENT_BYTES = 1024 * 1024;

const tooLarge = (bytes: number): DecodeResult => ({ ok: false, reason: `event is ${bytes} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take` });

/** How deep an event's arrays and objects may nest (as a request body's, src/http/server.ts). */
export const MAX_EVENT_DEPTH = 64;
/** The dead letter's reason for an event nested deeper than that. */
export const TOO_DEEP = `event nests arrays or objects deeper than ${MAX_EVENT_DEPTH} levels`;
/**
 * The largest exponent a number in an event may have, and the most all its numbers' exponents
 * may add up to. The log keeps the payload as jsonb, whose numbers keep every digit: `1e131000`
 * takes 4 bytes to send and 131,001 characters each time the log is read, and a few thousand of
 * them made an event unreadable (out of memory) for the projector, the replay and the dispatcher
 * alike; 170,000 numbers of `1e400` in one 1 MiB event would still read back as 68 MB. A double
 * needs no exponent beyond 308 (or −324); Mailjet's events have none.
 */
export const MAX_NUMBER_EXPONENT = 400;
export const MAX_EXPONENT_SUM = 10_000;

/**
 * What in an event's JSON text the log must not take, whatever the path (NATS, HTTP, import,
 * publish): nesting a recursive reader would overflow its stack on, or numbers that grow to
 * hundreds of digits once stored. Null when there is none.
 */
export function payloadTextProblem(text: string): string | null {
  const shape = scanNumbersAndDepth(text, MAX_EVENT_DEPTH);
  if (shape.deeper) return TOO_DEEP;
  if (shape.maxExponent > MAX_NUMBER_EXPONENT) return `event holds a number with an exponent beyond ±${MAX_NUMBER_EXPONENT}, which the log would store written out in full`;
  if (shape.exponentSum > MAX_EXPONENT_SUM) return `event's numbers have exponents adding up to more than ${MAX_EXPONENT_SUM}, which the log would store written out in full`;
  return null;
}

/** Its UTF-8 size, when a string of this length could be over the limit. */
const oversize = (text: string): number | null => {
  if (text.length * 3 <= MAX_EVENT_BYTES) return null;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > MAX_EVENT_BYTES ? bytes : null;
};

export function decodeEventBytes(bytes: Uint8Array, ctx: DecodeContext): DecodeResult {
  if (bytes.length > MAX_EVENT_BYTES) return tooLarge(bytes.length);
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, reason: 'body is not valid UTF-8' };
  }
  const result = decodeEventText(text, ctx);
  // The payload is the body's own text, so the body is its UTF-8 (unless the decoder dropped a byte order mark).
  if (result.ok && result.row.payload === text && bytes[0] !== 0xef) result.row.payloadUtf8 = bytes;
  return result;
}

/** A digit then `e`: the text may hold a number with an exponent (or only a string that looks like one). */
const MAY_HAVE_EXPONENT = /\d[eE]/;

/**
 * A row the fast path took, checked as payloadTextProblem would: its values are flat by the fast
 * path's own rules (no arrays or objects), so only its numbers' exponents can be a problem, and
 * only if the text has a digit then an `e` somewhere. Saves most events a scan of their text.
 */
function checkedFast(row: LogEventRow, text: string): DecodeResult {
  const problem = MAY_HAVE_EXPONENT.test(text) ? payloadTextProblem(text) : null;
  return problem === null ? { ok: true, row } : { ok: false, reason: problem };
}

export function decodeEventText(text: string, ctx: DecodeContext): DecodeResult {
  const size = oversize(text);
  if (size !== null) return tooLarge(size);
  const fast = fastDecodeText(text, ctx);
  if (fast !== null) return checkedFast(fast, text);
  const problem = payloadTextProblem(text);
  if (problem !== null) return { ok: false, reason: problem };
  return decodeEventTextStrictly(text, ctx);
}

/** The zod path alone, for events the fast path is unsure of (and to test the fast path against). */
export function decodeEventTextStrictly(text: string, ctx: DecodeContext): DecodeResult {
  let value: unknown;
  try {
    value = parseExactJson(text);
  } catch (err) {
    return { ok: false, reason: `body is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
  }
  return decodeEventValueStrictly(value, ctx, text);
}

/** `payloadText` is the event's own JSON text when the caller has it (saves writing it again). */
export function decodeEventValue(value: unknown, ctx: DecodeContext, payloadText?: string): DecodeResult {
  const size = payloadText === undefined ? null : oversize(payloadText);
  if (size !== null) return tooLarge(size);
  const fast = fastDecodeValue(value, ctx, payloadText);
  if (fast !== null) return checkedFast(fast, fast.payload);
  const problem = payloadText === undefined ? null : payloadTextProblem(payloadText);
  if (problem !== null) return { ok: false, reason: problem };
  return decodeEventValueStrictly(value, ctx, payloadText);
}

export function decodeEventValueStrictly(value: unknown, ctx: DecodeContext, payloadText?: string): DecodeResult {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, reason: 'event must be a JSON object' };
  }
  const raw = value as Record<string, unknown>;
  const parsed = rawEventSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, reason: describeIssues(parsed.error, raw) };
  const e = parsed.data;

  if (e.APIKeyID !== undefined && e.APIKeyID !== ctx.apiKeyId) {
    return { ok: false, reason: `APIKeyID: ${e.APIKeyID} does not match the sender's API key ${ctx.apiKeyId}` };
  }
  if (ctx.subjectEvent !== undefined && ctx.subjectEvent !== e.event) {
    return { ok: false, reason: `event: "${e.event}" does not match the subject's event "${ctx.subjectEvent}"` };
  }
  let text = payloadText;
  if (text === undefined) {
    // A value with no text of its own (parsed by the caller): written out here, then checked as text is.
    try {
      text = stringifyExactJson(raw);
    } catch {
      return { ok: false, reason: TOO_DEEP };
    }
    const problem = payloadTextProblem(text);
    if (problem !== null) return { ok: false, reason: problem };
  }
  // jsonb cannot hold U+0000 or a lone surrogate; refusing them here keeps one bad event from failing a whole batch.
  const unstorable = unstorableText(text, raw);
  if (unstorable !== null) return { ok: false, reason: unstorable };

  // Failure fields count only when `error` itself is there (as they always have).
  const failure = 'error' in e ? e : null;
  const checked: CheckedEvent = {
    event: e.event,
    time: e.time,
    MessageID: e.MessageID,
    email: e.email,
    EventID: e.EventID,
    mj_campaign_id: e.mj_campaign_id,
    mj_contact_id: e.mj_contact_id,
    mj_list_id: e.mj_list_id,
    mj_sender_id: e.mj_sender_id,
    sender: e.sender,
    customcampaign: e.customcampaign,
    url: e.event === 'click' ? e.url : undefined,
    agent: 'agent' in e ? e.agent : undefined,
    geo: 'geo' in e ? e.geo : undefined,
    hard_bounce: e.event === 'bounce' ? e.hard_bounce : undefined,
    blocked: e.event === 'bounce' ? e.blocked : undefined,
    failure: failure !== null,
    error_related_to: failure?.error_related_to,
    error: failure?.error,
  };
  return { ok: true, row: toLogRow(checked, raw, ctx, text) };
}
