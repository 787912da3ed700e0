import { positionOf, type Scenario } from '../../../support/projections.js';
import { D0, LINK_ID, message, UA_CHROME, UA_ID, UA_MAIL } from './common.js';

/**
 * Clicks, opens and unsubscribes of a list campaign: list-recipient and contact statistics,
 * recipient ESPs, links (normalized URLs), user agents, countries and click records.
 */

// Tenant 106: campaign 14 to list 24 from sender 34; all three messages carry the same dimensions.
const dims = {
  mj_campaign_id: 14,
  mj_list_id: 24,
  mj_sender_id: 34,
  sender: 'news@shop.example.com',
  customcampaign: 'spring',
};
const DIMS = { campaign_id: 14, list_id: 24, sender_id: 34, sender: 'news@shop.example.com', sender_domain: 'shop.example.com', custom_campaign: 'spring' };
const lee = message('6001', { ...dims, email: 'lee@gmail.com', mj_contact_id: 801 });
const max = message('6002', { ...dims, email: 'max@outlook.com', mj_contact_id: 802 });
const leeAgain = message('6003', { ...dims, email: 'lee@gmail.com', mj_contact_id: 801 });
const SALE = 'https://shop.example.com/sale?a=1&b=2';
const ABOUT = 'https://shop.example.com/about';

const engagement: Scenario = {
  name: 'engagement: links, user agents, countries, click records, list recipients, ESPs',
  tenant: '106',
  steps: [
    {
      append: [
        lee('sent', 's1', D0 + 100),
        lee('open', 'o1', D0 + 150, { agent: UA_MAIL, geo: 'FR' }),
        lee('click', 'c1', D0 + 200, { url: 'https://Shop.Example.com/sale?utm_source=x&b=2&a=1#top', agent: UA_CHROME, geo: 'fr' }),
        lee('click', 'c2', D0 + 300, { url: SALE, agent: UA_MAIL, geo: 'FR' }),
        lee('click', 'c3', D0 + 400, { url: ABOUT, agent: UA_CHROME, geo: 'DE' }),
        lee('unsub', 'u1', D0 + 500, { agent: 'List-Unsubscribe' }),
        max('sent', 's2', D0 + 110),
        max('click', 'c4', D0 + 600, { url: `${SALE}&utm_medium=mail`, agent: UA_CHROME, geo: 'FR' }),
        leeAgain('queued', 'q3', D0 + 120),
      ],
      then: [
        {
          table: 'link_clicks',
          rows: [
            { ...DIMS, url: SALE, clicked_messages: 2, clicked_events: 3, link_id: LINK_ID.sale },
            { ...DIMS, url: ABOUT, clicked_messages: 1, clicked_events: 1, link_id: LINK_ID.about },
          ],
        },
        {
          // the unsubscribe's agent is not an open or click
          table: 'user_agent_stats',
          rows: [
            { ...DIMS, event: 'open', platform: 'iOS', client: 'Apple Mail', count: 1, distinct_count: 1 },
            { ...DIMS, event: 'click', platform: 'Windows', client: 'Chrome', count: 3, distinct_count: 2 },
            { ...DIMS, event: 'click', platform: 'iOS', client: 'Apple Mail', count: 1, distinct_count: 1 },
          ],
        },
        {
          table: 'geo_stats',
          rows: [
            { ...DIMS, country: 'FR', opened_events: 1, clicked_events: 3, opened_messages: 1, clicked_messages: 2 },
            { ...DIMS, country: 'DE', clicked_events: 1, clicked_messages: 1 },
          ],
        },
        {
          table: 'click_stats',
          rows: [
            { ...DIMS, id: positionOf('c1'), message_id: '6001', contact_id: 801, clicked_at: D0 + 200, clicked_delay: 100, url: SALE, user_agent_id: UA_ID.chrome, ua_platform: 'Windows', ua_client: 'Chrome' },
            { ...DIMS, id: positionOf('c2'), message_id: '6001', contact_id: 801, clicked_at: D0 + 300, clicked_delay: 200, url: SALE, user_agent_id: UA_ID.mail, ua_platform: 'iOS', ua_client: 'Apple Mail' },
            { ...DIMS, id: positionOf('c3'), message_id: '6001', contact_id: 801, clicked_at: D0 + 400, clicked_delay: 300, url: ABOUT, user_agent_id: UA_ID.chrome, ua_platform: 'Windows', ua_client: 'Chrome' },
            { ...DIMS, id: positionOf('c4'), message_id: '6002', contact_id: 802, clicked_at: D0 + 600, clicked_delay: 490, url: SALE, user_agent_id: UA_ID.chrome, ua_platform: 'Windows', ua_client: 'Chrome' },
          ],
        },
        {
          table: 'list_recipient_stats',
          rows: [
            // list_recipient_id: stable id of 'list-recipient:106:24:<email>' (computed outside the code under test)
            { list_id: 24, email: 'lee@gmail.com', processed: 2, queued: 1, delivered: 1, opened: 1, clicked: 1, unsub: 1, messages: 2, named: 2, list_recipient_id: '136273020385349', contact_id: 801, last_activity_at: D0 + 500, unsubscribed_at: D0 + 500 },
            { list_id: 24, email: 'max@outlook.com', processed: 1, delivered: 1, clicked: 1, messages: 1, named: 1, list_recipient_id: '204045909302952', contact_id: 802, last_activity_at: D0 + 600, unsubscribed_at: null },
          ],
        },
        {
          table: 'contact_stats',
          rows: [
            { email: 'lee@gmail.com', processed: 2, queued: 1, delivered: 1, opened: 1, clicked: 1, unsub: 1, messages: 2, named: 2, contact_id: 801, last_activity_at: D0 + 500 },
            { email: 'max@outlook.com', processed: 1, delivered: 1, clicked: 1, messages: 1, named: 1, contact_id: 802, last_activity_at: D0 + 600 },
          ],
        },
        {
          table: 'recipient_esp_stats',
          rows: [
            { campaign_id: 14, esp: 'Gmail', attempted: 2, delivered: 1, opened: 1, clicked: 1, unsub: 1, opened_of_attempted: 1, clicked_of_opened: 1, unsub_of_delivered: 1 },
            // max clicked without an open: a click, not a share of the opened
            { campaign_id: 14, esp: 'Outlook', attempted: 1, delivered: 1, clicked: 1 },
          ],
        },
        {
          // open delay 150−100; click delays 200−100 and 600−110
          table: 'statcounters',
          where: { resolution: 'L' },
          rows: (
            [
              ['A', 0],
              ['C', 14],
              ['L', 24],
              ['S', 34],
            ] as const
          ).map(([source_type, source_id]) => ({
            source_type,
            source_id,
            timing: 'L',
            timeslice: 0,
            total: 3, message_sent: 2, message_queued: 1, message_opened: 1, message_clicked: 2, message_unsub: 1, event_opened: 1, event_clicked: 4, event_unsub: 1, event_open_delay: 50, event_click_delay: 590,
          })),
        },
        {
          table: 'open_info',
          rows: [{ ...DIMS, message_id: '6001', id: positionOf('o1'), contact_id: 801, opened_at: D0 + 150, arrived_at: D0 + 100, user_agent_id: UA_ID.mail, user_agent_full: UA_MAIL, ua_platform: 'iOS', ua_client: 'Apple Mail' }],
        },
        {
          table: 'messages',
          rows: [
            { ...DIMS, message_id: '6001', contact_id: 801, email: 'lee@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 100, status: 'unsub', first_open_at: D0 + 150, first_click_at: D0 + 200, last_activity_at: D0 + 500, attempt_count: 1, event_count: 6 },
            { ...DIMS, message_id: '6002', contact_id: 802, email: 'max@outlook.com', recipient_domain: 'outlook.com', esp: 'Outlook', message_time: D0 + 110, status: 'clicked', first_click_at: D0 + 600, last_activity_at: D0 + 600, attempt_count: 1, event_count: 2 },
            { ...DIMS, message_id: '6003', contact_id: 801, email: 'lee@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 120, status: 'queued', last_activity_at: D0 + 120, attempt_count: 0, event_count: 1 },
          ],
        },
      ],
    },
  ],
};

export const ENGAGEMENT_SCENARIOS: readonly Scenario[] = [engagement];
