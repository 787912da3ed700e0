import { sql } from 'kysely';
import { z } from 'zod';
import { MESSAGE_STATES } from '../../events/enrich/index.js';
import { listSchema } from '../conventions/paging.js';
import { orderBy } from '../conventions/sort.js';
import { readList } from '../list-query.js';
import { defineResource } from '../resource.js';
import { MAX_UINT64, itemId } from './item-id.js';

/**
 * /messagestate and /messagestate/{ID}: the message states a bounce, block or deferral can be in,
 * the `StateID` that /bouncestatistics and /message give and /message's `MessageState` filter
 * takes. The same table for every key (src/events/enrich/bounce-state.ts).
 *
 * - `State` is the state's text, the webhook `error` words (e.g. "user unknown"), as
 *   /messagehistory gives it; `RelatedTo` its group, the webhook `error_related_to`;
 * - Sort: `ID` (the default), both directions;
 * - a malformed item id is a 400 naming `ID`; an unknown one a 404.
 */

const query = listSchema({});

const record = z.object({
  ID: z.number().int().meta({ description: 'StateID' }),
  RelatedTo: z.string().meta({ description: 'recipient, domain, content, spam, system or mailjet' }),
  State: z.string().meta({ description: 'The state, in the webhook error words' }),
});

interface Row {
  id: number;
  related_to: string;
  state: string;
}

const STATES = sql`(VALUES ${sql.join(MESSAGE_STATES.map((s) => sql`(${s.id}::int4, ${s.relatedTo}::text, ${s.error}::text)`))}) AS s(id, related_to, state)`;
const SORTABLE = { ID: sql.ref('s.id') };
const toWire = (r: Row) => ({ ID: r.id, RelatedTo: r.related_to, State: r.state });

export const messagestateResource = defineResource({
  name: 'messagestate',
  description: 'The states of a bounced, blocked or deferred message (StateID).',
  query,
  record,
  async list({ db, query: q, page }) {
    const { rows, total } = await readList<Row>(db, { from: STATES, columns: sql`s.id, s.related_to, s.state`, where: [sql`TRUE`], orderBy: orderBy('messagestate', q.Sort, SORTABLE, [sql`s.id`]) }, page);
    return { rows: rows.map(toWire), total };
  },
  items: [
    {
      path: ':id',
      description: 'One state by its StateID.',
      async find(_ctx, params) {
        const ID = itemId(params['id'] ?? '', 'ID', MAX_UINT64);
        if (ID === null) return [];
        const state = MESSAGE_STATES.find((s) => BigInt(s.id) === ID);
        return state === undefined ? [] : [toWire({ id: state.id, related_to: state.relatedTo, state: state.error })];
      },
    },
  ],
});
