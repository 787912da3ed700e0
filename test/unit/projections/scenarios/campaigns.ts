import type { Scenario } from '../../../support/projections.js';
import { D0, message } from './common.js';

/** Campaign metadata: a later `campaign` event updates only the fields it carries; an older one arriving late changes nothing. */

// Tenant 105, campaign 13.
const meta = (eventId: string, time: number, fields: Record<string, unknown>) => ({ event: 'campaign', EventID: eventId, time, mj_campaign_id: 13, ...fields });
const m = message('5001', { email: 'kim@example.org', mj_campaign_id: 13 });
const spring = { campaign_id: 13, title: 'Spring sale', id_type: 'Campaign', status: 2, send_time_start: D0 + 100, edit_mode: 'html', edit_type: 'full' };

const metadata: Scenario = {
  name: 'campaign-overview: metadata merged field by field, counts of distinct messages',
  tenant: '105',
  steps: [
    {
      append: [
        meta('cmp1', D0 + 100, {
          Title: 'Spring sale',
          Subject: 'Everything must go',
          IDType: 'Campaign',
          Status: 2,
          SendTimeStart: D0 + 100,
          Starred: false,
          EditMode: 'html',
          EditType: 'full',
        }),
      ],
      then: [
        { table: 'campaigns', rows: [{ ...spring, subject: 'Everything must go', starred: false, updated_at: D0 + 100 }] },
        { table: 'campaign_stats', rows: [] },
        { table: 'messages', rows: [] },
      ],
    },
    {
      append: [
        meta('cmp2', D0 + 200, { Subject: 'Last chance', Starred: true }),
        meta('cmp0', D0 + 50, { Title: 'Draft title', Status: 0 }),
        m('sent', 's', D0 + 300),
        m('open', 'o', D0 + 400),
        m('open', 'o2', D0 + 500),
      ],
      then: [
        { table: 'campaigns', rows: [{ ...spring, subject: 'Last chance', starred: true, updated_at: D0 + 200 }] },
        { table: 'campaign_stats', rows: [{ campaign_id: 13, processed: 1, delivered: 1, opened: 1, messages: 1, named: 1, first_message_time: D0 + 300 }] },
        // campaign events are no messages
        { table: 'statcounters', where: { source_type: 'C', timing: 'L' }, rows: [{ source_id: 13, resolution: 'L', timeslice: 0, total: 1, message_sent: 1, message_opened: 1, event_opened: 2, event_open_delay: 100 }] },
        { table: 'messages', rows: [{ message_id: '5001', campaign_id: 13, email: 'kim@example.org', recipient_domain: 'example.org', esp: 'others', message_time: D0 + 300, status: 'opened', first_open_at: D0 + 400, last_activity_at: D0 + 500, attempt_count: 1, event_count: 3 }] },
      ],
    },
  ],
};

export const CAMPAIGN_SCENARIOS: readonly Scenario[] = [metadata];
