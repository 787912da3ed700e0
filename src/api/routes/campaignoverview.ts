import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { wireId, wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { bool, int64, list, oneOf, text } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { conditions, readList, tenant } from '../list-query.js';
import { type RequestContext, defineResource } from '../resource.js';
import { itemId } from './item-id.js';
import { foldedText } from '../conventions/folded-text.js';

/**
 * /campaignoverview — one record per campaign: distinct-message counts from `campaign_stats`
 * and metadata from `campaign` events in `campaigns` (projections/campaign-overview.ts). A
 * campaign with messages but no metadata, or metadata but no messages, is listed too.
 * - Missing metadata: IDType "Campaign"; Status 2 (Sent) when it has messages, else 0 (Draft);
 *   SendTimeStart the first message time (0 when none); Starred false; EditType "unknown" (the
 *   member of Mailjet's EditType enum for it); other texts "".
 * - Status flags: All = every status but Deleted (−2); Archived = −1; Drafts = 0; Programmed = 1;
 *   Sent = 2. Flags set to true select the union of their statuses; a flag set to false excludes
 *   its statuses (All=false leaves the deleted ones). No flag: every campaign, deleted included.
 * - IDType: comma list of AX, Campaign, NL (any case). Subject: contains, without regard to case.
 * - Item paths /{ID} and /{IDType}/{ID}: every campaign with that id (of that type).
 * - Sort: ID, SendTimeStart and the counts, both directions.
 */

const ID_TYPES = ['AX', 'Campaign', 'NL'] as const;

const STATUS_FLAGS = {
  All: sql`status <> -2`,
  Archived: sql`status = -1`,
  Drafts: sql`status = 0`,
  Programmed: sql`status = 1`,
  Sent: sql`status = 2`,
} as const;
type StatusFlag = keyof typeof STATUS_FLAGS;

const query = listSchema({
  All: bool().optional().meta({ description: 'Every campaign but deleted ones (Status -2)' }),
  Archived: bool().optional().meta({ description: 'Archived campaigns (Status -1)' }),
  Drafts: bool().optional().meta({ description: 'Drafts (Status 0)' }),
  ID: int64({ signed: true }).optional(),
  IDType: list(oneOf(ID_TYPES)).optional().meta({ description: 'AX, Campaign, NL, or a comma list of them' }),
  Programmed: bool().optional().meta({ description: 'Scheduled campaigns (Status 1)' }),
  Sent: bool().optional().meta({ description: 'Sent campaigns (Status 2)' }),
  Starred: bool().optional(),
  Subject: text().optional().meta({ description: 'Subject contains this, without regard to case' }),
});

const record = z.object({
  ClickedCount: z.number().int(),
  DeliveredCount: z.number().int(),
  EditMode: z.string(),
  EditType: z.string().meta({ description: 'full, or unknown when no campaign event said' }),
  ID: z.number().int(),
  IDType: z.string().meta({ description: 'Campaign (sent campaign), AX (A/B test), NL (newsletter draft); "Campaign" when the metadata has none' }),
  OpenedCount: z.number().int(),
  ProcessedCount: z.number().int(),
  SendTimeStart: z.number().int().meta({ description: 'Unix seconds; the first message time when the metadata has none' }),
  Starred: z.boolean(),
  Status: z.number().int().meta({ description: '-3 AXCanceled, -2 Deleted, -1 Archived, 0 Draft, 1 Programmed, 2 Sent, 3 AXTested, 4 AXSelected' }),
  Subject: z.string(),
  Title: z.string(),
});

interface Row {
  id: bigint;
  processed: bigint;
  delivered: bigint;
  opened: bigint;
  clicked: bigint;
  send_time_start: bigint;
  status: number;
  id_type: string;
  starred: boolean;
  title: string;
  subject: string;
  edit_mode: string;
  edit_type: string;
}

const SORTABLE = {
  ID: sql.ref('id'),
  SendTimeStart: sql.ref('send_time_start'),
  ProcessedCount: sql.ref('processed'),
  DeliveredCount: sql.ref('delivered'),
  OpenedCount: sql.ref('opened'),
  ClickedCount: sql.ref('clicked'),
};

/** Counts and metadata side by side, defaults filled in; `id` narrows both sides early. */
function campaigns(apiKeyId: string, id?: bigint): RawBuilder<unknown> {
  const only = id !== undefined ? sql`AND campaign_id = ${id.toString()}::int8` : sql``;
  return sql`(SELECT COALESCE(s.api_key_id, m.api_key_id) AS api_key_id, COALESCE(s.campaign_id, m.campaign_id) AS id,
      COALESCE(s.processed, 0) AS processed, COALESCE(s.delivered, 0) AS delivered,
      COALESCE(s.opened, 0) AS opened, COALESCE(s.clicked, 0) AS clicked,
      COALESCE(m.send_time_start, s.first_message_time, 0) AS send_time_start,
      COALESCE(m.status, CASE WHEN s.campaign_id IS NULL THEN 0 ELSE 2 END) AS status,
      COALESCE(m.id_type, 'Campaign') AS id_type, COALESCE(m.starred, FALSE) AS starred,
      COALESCE(m.title, '') AS title, COALESCE(m.subject, '') AS subject,
      COALESCE(m.edit_mode, '') AS edit_mode, COALESCE(NULLIF(m.edit_type, ''), 'unknown') AS edit_type
    FROM (SELECT * FROM campaign_stats WHERE ${tenant(apiKeyId)} AND messages > 0 ${only}) s
    FULL JOIN (SELECT * FROM campaigns WHERE ${tenant(apiKeyId)} ${only}) m ON m.campaign_id = s.campaign_id) t`;
}

function statusCondition(q: Partial<Record<StatusFlag, boolean | undefined>>): RawBuilder<unknown>[] {
  const given = (Object.keys(STATUS_FLAGS) as StatusFlag[]).filter((f) => q[f] !== undefined);
  const chosen = given.filter((f) => q[f] === true).map((f) => STATUS_FLAGS[f]);
  const excluded = given.filter((f) => q[f] === false).map((f) => sql`NOT (${STATUS_FLAGS[f]})`);
  return [...(chosen.length > 0 ? [sql`(${sql.join(chosen, sql` OR `)})`] : []), ...excluded];
}

export const campaignoverviewResource = defineResource({
  name: 'campaignoverview',
  description: 'Counts and metadata per campaign (sent campaigns, drafts, A/B tests).',
  query,
  record,
  async list({ db, principal, query: q, page }) {
    const where = [
      tenant(principal.apiKeyId),
      ...statusCondition(q),
      ...conditions([
        [q.IDType, () => sql`lower(id_type) = ANY(${(q.IDType ?? []).map((t) => t.toLowerCase())}::text[])`],
        [q.Starred, () => sql`starred = ${q.Starred ?? false}`],
        [q.Subject, () => sql`strpos(lower(subject), ${foldedText(q.Subject ?? '')}) > 0`],
      ]),
    ];
    const from = campaigns(principal.apiKeyId, q.ID);
    const { rows, total } = await readList<Row>(db, { from, columns: sql`*`, where, orderBy: orderBy('campaignoverview', q.Sort, SORTABLE, [sql`id`]) }, page);
    return { rows: rows.map(toWire), total };
  },
  items: [
    { path: ':id', description: 'A campaign by ID (every type)', find: (ctx, p) => findCampaign(ctx, p['id'] ?? '', undefined) },
    { path: ':idType/:id', description: 'A campaign by IDType (AX, Campaign, NL) and ID', find: (ctx, p) => findCampaign(ctx, p['id'] ?? '', p['idType'] ?? '') },
  ],
});

async function findCampaign({ db, principal }: RequestContext, idText: string, idTypeText: string | undefined): Promise<Record<string, unknown>[]> {
  const id = itemId(idText, 'ID');
  let idType: string | undefined;
  if (idTypeText !== undefined) {
    idType = ID_TYPES.find((t) => t.toLowerCase() === idTypeText.toLowerCase());
    if (idType === undefined) throw apiErrors.badRequest(`Invalid parameter IDType: must be one of ${ID_TYPES.join(', ')} (got ${JSON.stringify(idTypeText)})`);
  }
  if (id === null) return [];
  const type = idType !== undefined ? sql`AND lower(id_type) = ${idType.toLowerCase()}` : sql``;
  const r = await sql<Row>`SELECT * FROM ${campaigns(principal.apiKeyId, id)} WHERE ${tenant(principal.apiKeyId)} ${type} ORDER BY id_type`.execute(db);
  return r.rows.map(toWire);
}

function toWire(r: Row): Record<string, unknown> {
  return {
    ClickedCount: wireInt(r.clicked),
    DeliveredCount: wireInt(r.delivered),
    EditMode: r.edit_mode,
    EditType: r.edit_type,
    ID: wireId(r.id),
    IDType: r.id_type,
    OpenedCount: wireInt(r.opened),
    ProcessedCount: wireInt(r.processed),
    SendTimeStart: wireInt(r.send_time_start),
    Starred: r.starred,
    Status: r.status,
    Subject: r.subject,
    Title: r.title,
  };
}
