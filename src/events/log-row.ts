import { bounceStateId, espName, normalizeUrl, parseUserAgent, recipientDomain } from './enrich/index.js';
import { deriveEventId } from './event-id.js';
import type { EventType } from './schema.js';

/**
 * A row for the log: the event's validated fields, its EventID, and what enrichment computes
 * once (recipient domain and ESP, user agent, normalized link, bounce state), so projections
 * never have to parse or look anything up.
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
  /** The payload's UTF-8 bytes when they are at hand (the NATS message body): COPY sends them as they are. Not a column. */
  payloadUtf8?: Uint8Array;
}

export interface DecodeContext {
  /** The tenant: from the NATS subject or the authenticated HTTP key. Authoritative. */
  apiKeyId: string;
  /** The `<event>` token of the NATS subject, which must match the body. */
  subjectEvent?: string;
  natsSeq?: number;
}

/**
 * What a row is built from: an event that passed the contract (ids already decimal strings),
 * whichever validator checked it — the zod schema or the fast path.
 */
export interface CheckedEvent {
  event: EventType;
  time: number;
  MessageID: string | undefined;
  email: string | undefined;
  EventID: string | undefined;
  mj_campaign_id: string | undefined;
  mj_contact_id: string | undefined;
  mj_list_id: string | undefined;
  mj_sender_id: string | undefined;
  sender: string | undefined;
  customcampaign: string | undefined;
  url: string | undefined;
  agent: string | undefined;
  geo: string | undefined;
  hard_bounce: boolean | undefined;
  blocked: boolean | undefined;
  /** A failure (bounce, blocked, deferred) that came with its `error` field (the fields count only then). */
  failure: boolean;
  error_related_to: string | undefined;
  error: string | undefined;
}

/** `raw` is the event as parsed (64-bit ids exact), for deriving an EventID when it has none. */
export function toLogRow(e: CheckedEvent, raw: Record<string, unknown>, ctx: DecodeContext, payload: string): LogEventRow {
  const domain = e.email !== undefined ? recipientDomain(e.email) : null;
  // An empty agent is no agent: one "no user agent" row, not an Other/Other beside it.
  const ua = e.agent !== undefined && /\S/.test(e.agent) ? parseUserAgent(e.agent) : null;
  const geo = e.geo?.trim().toUpperCase() ?? '';
  const sender = e.sender !== undefined && e.sender !== '' ? e.sender : null;
  return {
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
    url: e.url !== undefined ? normalizeUrl(e.url) : null,
    ua_platform: ua?.platform ?? null,
    ua_client: ua?.client ?? null,
    geo: geo !== '' ? geo : null,
    hard_bounce: e.event === 'bounce' ? (e.hard_bounce ?? false) : null,
    blocked: e.event === 'bounce' ? (e.blocked ?? false) : null,
    error_related_to: e.failure ? (e.error_related_to ?? null) : null,
    error: e.failure ? (e.error ?? null) : null,
    state_id: e.failure ? bounceStateId(e.error) : null,
    nats_seq: ctx.natsSeq ?? null,
    payload,
  };
}
