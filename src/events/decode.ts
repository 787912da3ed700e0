import { bounceStateId, espName, normalizeUrl, parseUserAgent, recipientDomain } from './enrich/index.js';
import { deriveEventId } from './event-id.js';
import { parseExactJson, stringifyExactJson } from './exact-json.js';
import { describeIssues, type EventType, rawEventSchema } from './schema.js';

/**
 * Raw event → a row for the log: validated against the contract, given its EventID, and
 * enriched once (recipient domain and ESP, user agent, normalized link, bounce state), so
 * projections never have to parse or look anything up.
 */
export interface LogEventRow {
  event_id: string;
  api_key_id: string;
  type: EventType;
  event_time: number;
  message_id: string | null;
  email: string | null;
  recipient_domain: string | null;
  esp: string | null;
  campaign_id: string;
  contact_id: string;
  list_id: string;
  sender_id: string;
  sender: string | null;
  sender_domain: string | null;
  custom_campaign: string | null;
  url: string | null;
  ua_platform: string | null;
  ua_client: string | null;
  geo: string | null;
  hard_bounce: boolean | null;
  blocked: boolean | null;
  error_related_to: string | null;
  error: string | null;
  state_id: number | null;
  nats_seq: number | null;
  /** The event as received, as JSON text. */
  payload: string;
}

export type DecodeResult = { ok: true; row: LogEventRow } | { ok: false; reason: string };

export interface DecodeContext {
  /** The tenant: from the NATS subject or the authenticated HTTP key. Authoritative. */
  apiKeyId: string;
  /** The `<event>` token of the NATS subject, which must match the body. */
  subjectEvent?: string;
  natsSeq?: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeEventBytes(bytes: Uint8Array, ctx: DecodeContext): DecodeResult {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, reason: 'body is not valid UTF-8' };
  }
  return decodeEventText(text, ctx);
}

export function decodeEventText(text: string, ctx: DecodeContext): DecodeResult {
  let value: unknown;
  try {
    value = parseExactJson(text);
  } catch (err) {
    return { ok: false, reason: `body is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
  }
  return decodeEventValue(value, ctx, text);
}

/** `payloadText` is the event's own JSON text when the caller has it (saves writing it again). */
export function decodeEventValue(value: unknown, ctx: DecodeContext, payloadText?: string): DecodeResult {
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
  const text = payloadText ?? stringifyExactJson(raw);
  // jsonb cannot hold U+0000; refusing it here keeps one bad event from failing a whole batch.
  if (text.includes('\\u0000')) return { ok: false, reason: 'event contains a NUL character (\\u0000), which cannot be stored' };

  const domain = e.email !== undefined ? recipientDomain(e.email) : null;
  const agent = 'agent' in e ? e.agent : undefined;
  const ua = agent !== undefined ? parseUserAgent(agent) : null;
  const failure = 'error' in e ? e : null;
  const sender = e.sender !== undefined && e.sender !== '' ? e.sender : null;

  return {
    ok: true,
    row: {
      event_id: e.EventID ?? deriveEventId(ctx.apiKeyId, raw),
      api_key_id: ctx.apiKeyId,
      type: e.event,
      event_time: e.time,
      message_id: e.MessageID ?? null,
      email: e.email?.trim() ?? null,
      recipient_domain: domain,
      esp: domain !== null ? espName(domain) : null,
      campaign_id: e.mj_campaign_id ?? '0',
      contact_id: e.mj_contact_id ?? '0',
      list_id: e.mj_list_id ?? '0',
      sender_id: e.mj_sender_id ?? '0',
      sender,
      sender_domain: sender !== null ? recipientDomain(sender) : null,
      custom_campaign: e.customcampaign !== undefined && e.customcampaign !== '' ? e.customcampaign : null,
      url: e.event === 'click' ? normalizeUrl(e.url) : null,
      ua_platform: ua?.platform ?? null,
      ua_client: ua?.client ?? null,
      geo: 'geo' in e && e.geo !== undefined && e.geo !== '' ? e.geo.toUpperCase() : null,
      hard_bounce: e.event === 'bounce' ? (e.hard_bounce ?? false) : null,
      blocked: e.event === 'bounce' ? (e.blocked ?? false) : null,
      error_related_to: failure?.error_related_to ?? null,
      error: failure?.error ?? null,
      state_id: failure !== null ? bounceStateId(failure.error) : null,
      nats_seq: ctx.natsSeq ?? null,
      payload: text,
    },
  };
}
