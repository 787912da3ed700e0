import type { WebhookEventType } from './callback-url-input.js';

/**
 * The object Mailjet POSTs for an event (reference/mailjet-api.md §4), field for field, as JSON
 * text: `MessageID` a bare 64-bit integer, `mj_message_id` its string twin, ids as numbers,
 * `blocked`/`hard_bounce` booleans, absent text fields as "" (Mailjet always sends them).
 * Fields outside Mailjet's callback shape (EventID, APIKeyID, sender…) are not sent.
 */

export interface SourceEvent {
  position: bigint;
  apiKeyId: bigint;
  type: WebhookEventType;
  time: bigint | number;
  /** Decimal digits of the 64-bit MessageID. */
  messageId: string;
  campaignId: bigint;
  contactId: bigint;
  listId: bigint;
  /** The raw event as received (64-bit integers as bigints). */
  payload: Readonly<Record<string, unknown>>;
}

type Field = readonly [name: string, kind: 'text' | 'bool' | 'int'];

const TRACKING: readonly Field[] = [
  ['ip', 'text'],
  ['geo', 'text'],
  ['agent', 'text'],
];
const FAILURE: readonly Field[] = [
  ['error_related_to', 'text'],
  ['error', 'text'],
];

/** Per type, the fields after the common ones (in Mailjet's order). */
const EXTRA: Readonly<Record<WebhookEventType, readonly Field[]>> = {
  sent: [
    ['mj_message_id', 'text'],
    ['smtp_reply', 'text'],
  ],
  open: TRACKING,
  click: [['url', 'text'], ...TRACKING],
  bounce: [['blocked', 'bool'], ['hard_bounce', 'bool'], ...FAILURE],
  blocked: FAILURE,
  spam: [['source', 'text']],
  unsub: [['mj_list_id', 'int'], ...TRACKING],
};

export function mailjetCallbackJson(e: SourceEvent): string {
  const p = e.payload;
  const parts = [
    `{"event":${JSON.stringify(e.type)}`,
    `"time":${String(e.time)}`,
    `"MessageID":${/^\d+$/.test(e.messageId) ? e.messageId : '0'}`,
    `"Message_GUID":${text(p['Message_GUID'])}`,
    // The address as the log keeps it and dedupes it (the spaces around it are not part of it).
    `"email":${text(typeof p['email'] === 'string' ? p['email'].trim() : undefined)}`,
    `"mj_campaign_id":${e.campaignId}`,
    `"mj_contact_id":${e.contactId}`,
    `"customcampaign":${text(p['customcampaign'])}`,
  ];
  for (const [name, kind] of EXTRA[e.type]) {
    if (name === 'mj_message_id') parts.push(`"mj_message_id":${JSON.stringify(typeof p[name] === 'string' && p[name] !== '' ? p[name] : e.messageId)}`);
    else if (name === 'mj_list_id') parts.push(`"mj_list_id":${e.listId}`);
    else if (kind === 'bool') parts.push(`"${name}":${p[name] === true}`);
    else parts.push(`"${name}":${text(p[name])}`);
  }
  // A bounce's raw SMTP text may be absent in Mailjet's payloads too: sent only when known.
  if (e.type === 'bounce' && typeof p['comment'] === 'string') parts.push(`"comment":${JSON.stringify(p['comment'])}`);
  parts.push(`"CustomID":${text(p['CustomID'])}`, `"Payload":${text(p['Payload'])}}`);
  return parts.join(',');
}

function text(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : '""';
}
