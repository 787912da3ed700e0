import { type Kysely, type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { CUSTOM_ID_PREDICATE } from '../../db/migrations/0007-custom-id-index.js';
import type { Database } from '../../db/schema.js';
import { apiErrors } from '../../http/errors.js';
import { MESSAGE_STATUS, campaignConditions, messageStatusCondition } from '../conventions/campaign-filters.js';
import { wireId, wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { bool, int, int64, parseQuery, text, timestamp } from '../conventions/params.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { conditions, readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { foldedText } from '../conventions/folded-text.js';
import { MAX_UINT64, itemId } from './item-id.js';

/**
 * /message and /message/{MessageID}: one record per message with its current status, from the
 * `messages` read model (projections/messages.ts), with node-mailjet's `Message` field names.
 *
 * Fields we hold no data for have their neutral value: AttachmentCount 0, DestinationID 0,
 * FilterTime 0, MessageSize 0, SpamassassinScore 0, SpamassRules "", and IsClickTracked,
 * IsHTMLPartIncluded, IsOpenTracked, IsTextPartIncluded, IsUnsubTracked false.
 * Computed: ArrivedAt = the message time (its first delivery event; "" before one arrives);
 * AttemptCount = sent + deferred + bounce events; Delay = seconds from ArrivedAt to the first
 * `sent` (0 until delivered); StateID / StatePermanent from its last bounce or block (0 / false
 * when none); Status = node-mailjet's CurrentMessageStatus of its latest event; UUID = the
 * events' Message_GUID ("" when none), read from the event log, as are Delay and CustomID.
 * ContactAlt (the recipient address), Subject (the campaign's subject; "" without campaign
 * metadata) and CustomID (omitted otherwise) only with ShowContactAlt / ShowSubject /
 * ShowCustomID = true, as on Mailjet.
 *
 * Filters (GetMessageQueryParams and Mailjet's OpenAPI): Campaign (alias CampaignID), Contact
 * (ContactID), ContactAlt (recipient address, any case), FromTS / ToTS (ArrivedAt in
 * [FromTS, ToTS)), From / FromDomain (sender address / domain), SenderID (aliases FromID and
 * the deprecated Sender), FromType, MessageState (StateID), MessageStatus, CustomID (the
 * send-time custom id, exact, as its delivery events carry it: see `customIdCondition`).
 * Messages with no delivery event yet (only opens, say, arrived so far) are listed too;
 * FromTS/ToTS and CustomID exclude them. Not answerable from what is recorded, so a 400
 * naming them rather than silently ignored: Destination (destination ids are not recorded),
 * PlanSubscription and BounceReason (undocumented).
 * Sort: ID, ArrivedAt and AttemptCount, both directions; the default order is by ID.
 */

const SHOW = {
  ShowContactAlt: bool().optional(),
  ShowCustomID: bool().optional(),
  ShowSubject: bool().optional(),
} as const;

const UNSUPPORTED = {
  Destination: 'destination ids are not recorded',
  PlanSubscription: 'plan subscriptions are not recorded',
  BounceReason: 'its values are undocumented; filter on the message state with MessageState',
} as const;

const query = listSchema({
  Campaign: int64({ signed: true }).optional(),
  Contact: int64({ signed: true }).optional(),
  ContactAlt: text(320).optional().meta({ description: 'Recipient address' }),
  From: text().optional().meta({ description: 'Sender address' }),
  FromDomain: text().optional(),
  FromType: int(1, 3).optional().meta({ description: '1 Transactional, 2 Marketing, 3 Unknown (no campaign)' }),
  FromTS: timestamp('atOrAfter').optional().meta({ description: 'ArrivedAt at or after this' }),
  ToTS: timestamp('before').optional().meta({ description: 'ArrivedAt before this' }),
  MessageState: int(1, 21).optional().meta({ description: 'StateID (see /messagestate)' }),
  ...MESSAGE_STATUS,
  SenderID: int64({ signed: true }).optional(),
  ...SHOW,
  CustomID: text(255).optional().meta({ description: 'The send-time custom id (exact match)' }),
  Destination: text().optional(),
  PlanSubscription: text().optional(),
  BounceReason: text().optional(),
});

const ITEM_QUERY = z.object(SHOW);
const ALIASES = { campaignid: 'campaign', contactid: 'contact', fromid: 'senderid', sender: 'senderid', messagestatusid: 'messagestatus' };

const integer = () => z.number().int();
const record = z.object({
  ArrivedAt: z.string(),
  AttachmentCount: integer(),
  AttemptCount: integer(),
  CampaignID: integer(),
  ContactAlt: z.string(),
  ContactID: integer(),
  CustomID: z.string().optional().meta({ description: 'Only with ShowCustomID=true' }),
  Delay: integer(),
  DestinationID: integer(),
  FilterTime: integer(),
  ID: integer().meta({ description: '64-bit message id' }),
  IsClickTracked: z.boolean(),
  IsHTMLPartIncluded: z.boolean(),
  IsOpenTracked: z.boolean(),
  IsTextPartIncluded: z.boolean(),
  IsUnsubTracked: z.boolean(),
  MessageSize: integer(),
  SenderID: integer(),
  SpamassRules: z.string(),
  SpamassassinScore: z.number(),
  StateID: integer(),
  StatePermanent: z.boolean(),
  Status: z.string(),
  Subject: z.string(),
  UUID: z.string(),
});

interface Row {
  message_id: string;
  campaign_id: bigint;
  contact_id: bigint;
  sender_id: bigint;
  email: string;
  message_time: bigint | null;
  status: string;
  state_id: number | null;
  is_state_permanent: boolean;
  attempt_count: number;
  subject: string | null;
}

/** What only the log holds, per message. */
interface LogDetails {
  uuid: string | null;
  custom_id: string | null;
  sent_at: bigint | null;
}

type Show = { [K in keyof typeof SHOW]?: boolean | undefined };

const FROM = sql`messages t LEFT JOIN campaigns c ON c.api_key_id = t.api_key_id AND c.campaign_id = t.campaign_id`;
const COLUMNS = sql`t.message_id, t.campaign_id, t.contact_id, t.sender_id, t.email, t.message_time, t.status, t.state_id, t.is_state_permanent, t.attempt_count, c.subject`;

/** The page's order by id: see `idOrder` for why it depends on the filters given. */
const byMessageId = (filtered: boolean) => idOrder(sql.ref('t.message_id'), filtered);
const sortable = (filtered: boolean) => ({ ID: byMessageId(filtered), ArrivedAt: sql.ref('t.message_time'), AttemptCount: sql.ref('t.attempt_count') });

export const messageResource = defineResource({
  name: 'message',
  description: 'Messages with their current status (node-mailjet Message).',
  query,
  record,
  aliases: ALIASES,
  async list({ db, principal, query: q, page }) {
    for (const [name, why] of Object.entries(UNSUPPORTED)) {
      if (q[name as keyof typeof UNSUPPORTED] !== undefined) throw apiErrors.badRequest(`Invalid parameter ${name}: not supported by this server (${why})`);
    }
    if (q.FromTS !== undefined && q.ToTS !== undefined && q.ToTS <= q.FromTS) throw apiErrors.badRequest('Invalid parameter ToTS: must be later than FromTS');
    // Filters an index answers; the status and the state have none (see idOrder).
    const indexed = [
      ...campaignConditions(principal.apiKeyId, { CampaignID: q.Campaign, FromID: q.SenderID, From: q.From, FromDomain: q.FromDomain, FromType: q.FromType }),
      ...conditions([
        [q.Contact, () => sql`t.contact_id = ${String(q.Contact)}::int8`],
        [q.ContactAlt, () => sql`lower(t.email) = ${foldedText(q.ContactAlt?.trim() ?? '')}`],
        [q.FromTS, () => sql`t.message_time >= ${q.FromTS}::int8`],
        [q.ToTS, () => sql`t.message_time < ${q.ToTS}::int8`],
        [q.CustomID, () => customIdCondition(principal.apiKeyId, q.CustomID ?? '')],
      ]),
    ];
    const unindexed = [
      ...messageStatusCondition(principal.apiKeyId, q.MessageStatus, { onMessages: true }),
      ...conditions([[q.MessageState, () => sql`t.state_id = ${q.MessageState}::int`]]),
    ];
    const filtered = indexed.length > 0;
    const where = [tenant(principal.apiKeyId, sql.ref('t.api_key_id')), ...indexed, ...unindexed];
    const order = orderBy('message', q.Sort, sortable(filtered), [byMessageId(filtered)]);
    const { rows, total } = await readList<Row>(db, { from: FROM, key: sql`t.api_key_id, t.message_id`, columns: COLUMNS, where, orderBy: order }, page);
    return { rows: await withLogDetails(db, principal.apiKeyId, rows, q), total };
  },
  items: [
    {
      path: ':id',
      description: 'One message by its id (ShowContactAlt, ShowCustomID, ShowSubject apply).',
      query: ITEM_QUERY,
      async find({ db, principal, rawQuery }, params) {
        const ID = itemId(params['id'] ?? '', 'ID', MAX_UINT64);
        if (ID === null) return [];
        const show = parseQuery(ITEM_QUERY, rawQuery);
        const { rows } = await sql<Row>`SELECT ${COLUMNS} FROM ${FROM}
          WHERE ${tenant(principal.apiKeyId, sql.ref('t.api_key_id'))} AND t.message_id = ${ID.toString()}::numeric`.execute(db);
        return withLogDetails(db, principal.apiKeyId, rows, show);
      },
    },
  ],
});

/**
 * The messages whose delivery events (`sent`, `bounce`, `blocked`) carry `customId`, from the
 * log through its index on them (migration 0007, whose predicate this repeats word for word so
 * that the planner may use the index for any value). An empty id matches nothing: messages sent
 * without one are not indexed.
 */
export function customIdCondition(apiKeyId: string, customId: string): RawBuilder<unknown> {
  return sql`t.message_id IN (
    SELECT message_id FROM events
    WHERE api_key_id = ${apiKeyId}::int8 AND ${sql.raw(CUSTOM_ID_PREDICATE)} AND (payload->>'CustomID') = ${customId})`;
}

/** UUID, CustomID and the first `sent` of the page's messages, from the log (one indexed query). */
async function withLogDetails(db: Kysely<Database>, apiKeyId: string, rows: readonly Row[], show: Show): Promise<Record<string, unknown>[]> {
  if (rows.length === 0) return [];
  const { rows: details } = await sql<LogDetails & { message_id: string }>`
    SELECT message_id::text AS message_id, max(payload->>'Message_GUID') AS uuid, max(payload->>'CustomID') AS custom_id,
      min(event_time) FILTER (WHERE type = 'sent') AS sent_at
    FROM events WHERE api_key_id = ${apiKeyId}::int8 AND message_id = ANY(${rows.map((r) => r.message_id)}::numeric[])
    GROUP BY message_id`.execute(db);
  const byId = new Map(details.map((d) => [d.message_id, d]));
  return rows.map((r) => toWire(r, byId.get(r.message_id), show));
}

function toWire(r: Row, log: LogDetails | undefined, show: Show): Record<string, unknown> {
  const sentAt = log?.sent_at ?? null;
  return {
    ArrivedAt: rfc3339(r.message_time),
    AttachmentCount: 0,
    AttemptCount: wireInt(r.attempt_count),
    CampaignID: wireId(r.campaign_id),
    ContactAlt: show.ShowContactAlt === true ? r.email : '',
    ContactID: wireId(r.contact_id),
    ...(show.ShowCustomID === true ? { CustomID: log?.custom_id ?? '' } : {}),
    Delay: sentAt !== null && r.message_time !== null ? Math.max(0, Number(sentAt) - Number(r.message_time)) : 0,
    DestinationID: 0,
    FilterTime: 0,
    ID: wireId(r.message_id),
    IsClickTracked: false,
    IsHTMLPartIncluded: false,
    IsOpenTracked: false,
    IsTextPartIncluded: false,
    IsUnsubTracked: false,
    MessageSize: 0,
    SenderID: wireId(r.sender_id),
    SpamassRules: '',
    SpamassassinScore: 0,
    StateID: r.state_id ?? 0,
    StatePermanent: r.is_state_permanent,
    Status: r.status,
    Subject: show.ShowSubject === true ? (r.subject ?? '') : '',
    UUID: log?.uuid ?? '',
  };
}
