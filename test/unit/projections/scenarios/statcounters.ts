import type { Scenario } from '../../../support/projections.js';
import { D0, DAY, HOUR, message } from './common.js';

/**
 * statcounters: sources (APIKey, Campaign, List, Sender), distinct-message vs event counts, the
 * delay sums, Message vs Event timing (the traps are in traps.ts).
 */

// Tenant 101. m1: campaign 10, list 20, sender 30. m2: campaign 10, sender 30. m3: no campaign.
// m4: campaign 10. Message times: m1 D0+100 (queued), m2 D0+50, m3 D0+300, m4 D0+3650.
const m1 = message('1001', { email: 'ann@gmail.com', mj_campaign_id: 10, mj_list_id: 20, mj_sender_id: 30, mj_contact_id: 501 });
const m2 = message('1002', { email: 'bob@hotmail.fr', mj_campaign_id: 10, mj_sender_id: 30, mj_contact_id: 502 });
const m3 = message('1003', { email: 'cy@example.org', mj_contact_id: 503 });
const m4 = message('1004', { email: 'dee@gmail.com', mj_campaign_id: 10, mj_contact_id: 504 });
const url = 'https://shop.example.com/sale';

const sourcesAndTimings: Scenario = {
  name: 'statcounters: distinct messages vs events, delay sums, every source, Message vs Event timing',
  tenant: '101',
  steps: [
    {
      append: [
        m1('open', 'o3', D0 + DAY + HOUR), // next day, appended first: arrival order is irrelevant
        m1('queued', 'q1', D0 + 100),
        m1('sent', 's1', D0 + 160),
        m1('open', 'o1', D0 + 400),
        m1('open', 'o2', D0 + 4000),
        m1('click', 'c1', D0 + 700, { url }),
        m1('click', 'c2', D0 + 800, { url }),
        m1('spam', 'sp1', D0 + 1000),
        m1('unsub', 'u1', D0 + 1100),
        m2('queued', 'q2', D0 + 50),
        m2('bounce', 'b2', D0 + 3700, { hard_bounce: true, error_related_to: 'recipient', error: 'user unknown' }),
        m3('blocked', 'bl3', D0 + 300, { error_related_to: 'mailjet', error: 'preblocked' }),
        m4('deferred', 'd4', D0 + 3650),
        m4('sent', 's4', D0 + 7300),
        m4('open', 'o4', D0 + 7400),
      ],
      then: [
        {
          table: 'statcounters',
          where: { timing: 'L' },
          rows: [
            // open delay: m1 400−100 = 300, m4 7400−3650 = 3750 → 4050; click delay: m1 700−100 = 600
            { source_type: 'A', source_id: 0, resolution: 'L', timeslice: 0, total: 4, message_sent: 2, message_queued: 2, message_deferred: 1, message_blocked: 1, message_hard_bounced: 1, message_opened: 2, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 4, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 4050, event_click_delay: 600 },
            { source_type: 'C', source_id: 10, resolution: 'L', timeslice: 0, total: 3, message_sent: 2, message_queued: 2, message_deferred: 1, message_hard_bounced: 1, message_opened: 2, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 4, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 4050, event_click_delay: 600 },
            { source_type: 'L', source_id: 20, resolution: 'L', timeslice: 0, total: 1, message_sent: 1, message_queued: 1, message_opened: 1, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 3, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 300, event_click_delay: 600 },
            { source_type: 'S', source_id: 30, resolution: 'L', timeslice: 0, total: 2, message_sent: 1, message_queued: 2, message_hard_bounced: 1, message_opened: 1, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 3, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 300, event_click_delay: 600 },
          ],
        },
        {
          table: 'statcounters',
          where: { source_type: 'A', timing: 'M', resolution: 'H' },
          rows: [
            // m1, m2, m3: every event of theirs in the hour of their message time (o3 of the next day too)
            { source_id: 0, timeslice: D0, total: 3, message_sent: 1, message_queued: 2, message_blocked: 1, message_hard_bounced: 1, message_opened: 1, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 3, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 300, event_click_delay: 600 },
            { source_id: 0, timeslice: D0 + HOUR, total: 1, message_sent: 1, message_deferred: 1, message_opened: 1, event_opened: 1, event_open_delay: 3750 },
          ],
        },
        {
          table: 'statcounters',
          where: { source_type: 'A', timing: 'E', resolution: 'H' },
          rows: [
            { source_id: 0, timeslice: D0, total: 3, message_sent: 1, message_queued: 2, message_blocked: 1, message_opened: 1, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 1, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 300, event_click_delay: 600 },
            // m4's message time (deferred), m2's hard bounce, m1's second open
            { source_id: 0, timeslice: D0 + HOUR, total: 1, message_deferred: 1, message_hard_bounced: 1, event_opened: 1 },
            { source_id: 0, timeslice: D0 + 2 * HOUR, message_sent: 1, message_opened: 1, event_opened: 1, event_open_delay: 3750 },
            { source_id: 0, timeslice: D0 + DAY + HOUR, event_opened: 1 },
          ],
        },
        {
          table: 'statcounters',
          where: { source_type: 'A', timing: 'E', resolution: 'D' },
          rows: [
            { source_id: 0, timeslice: D0, total: 4, message_sent: 2, message_queued: 2, message_deferred: 1, message_blocked: 1, message_hard_bounced: 1, message_opened: 2, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 3, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 4050, event_click_delay: 600 },
            { source_id: 0, timeslice: D0 + DAY, event_opened: 1 },
          ],
        },
        {
          // Sender sources exist with Message timing only; m1 and m2 both fall in D0's first 5 minutes.
          table: 'statcounters',
          where: { source_type: 'S', source_id: 30, timing: 'M' },
          rows: (['S', 'H', 'D'] as const).map((resolution) => ({
            resolution,
            timeslice: D0,
            total: 2, message_sent: 1, message_queued: 2, message_hard_bounced: 1, message_opened: 1, message_clicked: 1, message_spam: 1, message_unsub: 1, event_opened: 3, event_clicked: 2, event_spam: 1, event_unsub: 1, event_open_delay: 300, event_click_delay: 600,
          })),
        },
        { table: 'statcounters', where: { source_type: 'S', timing: 'E' }, rows: [] },
        { table: 'statcounters', where: { source_type: 'L', timing: 'M' }, rows: [] },
      ],
    },
  ],
};

export const STATCOUNTERS_SCENARIOS: readonly Scenario[] = [sourcesAndTimings];
