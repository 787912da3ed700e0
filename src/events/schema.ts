import { z } from 'zod';

/**
 * The raw event contract (README, Sending events): one zod schema per event type, Mailjet's
 * event-callback field names. Unknown extra fields are allowed (kept in the log's payload).
 */

export const WEBHOOK_EVENT_TYPES = ['sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub'] as const;
export const EVENT_TYPES = [...WEBHOOK_EVENT_TYPES, 'queued', 'deferred', 'campaign'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const UINT64_MAX = 18_446_744_073_709_551_615n;
export const INT64_MAX = 9_223_372_036_854_775_807n;

/** Whether text is an API key id: a positive integer that fits the log's int8 column (subjects, JSONL files, flags). */
export const isApiKeyId = (text: string): boolean => /^[1-9]\d{0,18}$/.test(text) && BigInt(text) <= INT64_MAX;
export const MAX_UNIX_SECONDS = 253_402_300_799;

/** A 64-bit id as a JSON number (bigint past 2^53) or a decimal string → decimal string. */
function toDecimalId(v: unknown, max: bigint, what: string, ctx: z.RefinementCtx): string {
  if (v === undefined) {
    ctx.addIssue({ code: 'custom', message: 'is required' });
    return '';
  }
  // Fast paths for the common spellings; everything else goes through the checks below.
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return String(v);
  if (typeof v === 'bigint' && v >= 0n && v <= max) return v.toString();
  // Bare integers past 2^53 arrive as bigints (exact-json.ts): a number that large was written
  // with a decimal point or an exponent, and a double has already lost its last digits.
  if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) {
    ctx.addIssue({ code: 'custom', message: `must be ${what} written as plain digits (or a string of them): a number past 2^53 with a decimal point or exponent has lost its last digits, got ${describeValue(v)}` });
    return '';
  }
  const text = typeof v === 'string' ? v.trim() : typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v)) ? String(v) : '';
  if (!/^\d{1,20}$/.test(text) || BigInt(text) > max) {
    ctx.addIssue({ code: 'custom', message: `must be ${what} (an integer from 0 to ${max}), got ${describeValue(v)}` });
    return '';
  }
  return BigInt(text).toString();
}

const id = (max: bigint, what: string) => z.unknown().transform((v, ctx) => toDecimalId(v, max, what, ctx));
const optionalId = (max: bigint, what: string) =>
  z
    .unknown()
    .transform((v, ctx) => (v === undefined || v === null ? undefined : toDecimalId(v, max, what, ctx)))
    .optional();

function describeValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (v === undefined) return 'nothing';
  return typeof v === 'object' ? (Array.isArray(v) ? 'an array' : v === null ? 'null' : 'an object') : String(v);
}

const messageId = id(UINT64_MAX, 'a 64-bit unsigned integer');
/** mj_campaign_id and friends: 0 or absent means none. */
const refId = optionalId(INT64_MAX, 'a 64-bit integer');

const unixSeconds = z
  .number({ message: 'must be Unix seconds (an integer)' })
  .int({ message: 'must be Unix seconds (an integer)' })
  .min(0, { message: 'must not be negative' })
  .max(MAX_UNIX_SECONDS, { message: 'is past the year 9999' });

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;
/** The contract's test of an email address (the schema's and the fast path's). */
export const isEmailAddress = (v: string): boolean => v.length <= 320 && EMAIL_RE.test(v.trim());
const email = z.string().refine(isEmailAddress, { message: 'must be an email address' });
const str = (max = 2048) => z.string().max(max, { message: `is longer than ${max} characters` });

const common = {
  time: unixSeconds,
  APIKeyID: optionalId(INT64_MAX, 'an API key id'),
  EventID: z.string().min(1, { message: 'must not be empty' }).max(128, { message: 'is longer than 128 characters' }).optional(),
  mj_campaign_id: refId,
  mj_contact_id: refId,
  mj_list_id: refId,
  mj_sender_id: refId,
  sender: str(320).optional(),
  Message_GUID: str(128).optional(),
  customcampaign: str(255).optional(),
  CustomID: str(255).optional(),
  Payload: str(65_536).optional(),
};

const message = { ...common, MessageID: messageId, email };
const tracking = { ip: str(64).optional(), geo: str(8).optional(), agent: str(2048).optional() };
const failure = { error_related_to: str(64).optional(), error: str(255).optional() };

export const rawEventSchema = z.discriminatedUnion(
  'event',
  [
    z.object({ event: z.literal('sent'), ...message, mj_message_id: str(32).optional(), smtp_reply: str(2048).optional() }),
    z.object({ event: z.literal('open'), ...message, ...tracking }),
    z.object({ event: z.literal('click'), ...message, ...tracking, url: str(8192) }),
    z.object({
      event: z.literal('bounce'),
      ...message,
      ...failure,
      blocked: z.boolean().optional(),
      hard_bounce: z.boolean().optional(),
      comment: str(8192).optional(),
    }),
    z.object({ event: z.literal('blocked'), ...message, ...failure }),
    z.object({ event: z.literal('spam'), ...message, source: str(255).optional() }),
    z.object({ event: z.literal('unsub'), ...message, ...tracking }),
    z.object({ event: z.literal('queued'), ...message }),
    z.object({ event: z.literal('deferred'), ...message, ...failure, smtp_reply: str(2048).optional() }),
    z.object({
      event: z.literal('campaign'),
      ...common,
      mj_campaign_id: id(INT64_MAX, 'a campaign id').refine((v) => v !== '0', { message: 'must not be 0 for campaign events' }),
      MessageID: optionalId(UINT64_MAX, 'a 64-bit unsigned integer'),
      email: email.optional(),
      Title: str(1024).optional(),
      Subject: str(1024).optional(),
      IDType: z.enum(['Campaign', 'AX', 'NL']).optional(),
      Status: z.number().int().min(-3).max(4).optional(),
      SendTimeStart: unixSeconds.optional(),
      Starred: z.boolean().optional(),
      EditMode: str(16).optional(),
      EditType: str(16).optional(),
    }),
  ],
  { error: () => ({ message: `must be one of ${EVENT_TYPES.join(', ')}` }) },
);

/** "time: is required; MessageID: must be …" — the first few problems, each naming its field. */
export function describeIssues(error: z.ZodError, input: unknown): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const field = i.path.length > 0 ? i.path.join('.') : 'event';
      const given = i.path.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), input);
      const missing = given === undefined && i.path.length > 0 && i.code !== 'custom';
      return `${field}: ${missing ? 'is required' : i.message}`;
    })
    .join('; ');
}
