import { positionOf, type Scenario } from '../../../support/projections.js';
import { D0, HOUR, message, UA_CHROME, UA_ID, UA_MAIL, UA_PROXY } from './common.js';

/**
 * The ordering traps, checked on every table they move: events before their `sent`; an earlier
 * delivery event arriving after a later one (message time moves); an event hours late landing in
 * an old slice; duplicates (the same EventID is stored once).
 */

const url = 'https://shop.example.com/sale';

// Tenant 102, one message of campaign 11: its open and click come first, then its `sent`, then an
// earlier `queued`. Also checked by the message-level scenarios in records.ts.
const m5 = message('2001', { email: 'eve@gmail.com', mj_campaign_id: 11, mj_contact_id: 601 });

const m5Message = { message_id: '2001', contact_id: 601, campaign_id: 11, email: 'eve@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', status: 'clicked', first_open_at: D0 + 7300, first_click_at: D0 + 7400, last_activity_at: D0 + 7400 };
const m5Open = { message_id: '2001', id: positionOf('o'), contact_id: 601, campaign_id: 11, opened_at: D0 + 7300, user_agent_id: UA_ID.mail, user_agent_full: UA_MAIL, ua_platform: 'iOS', ua_client: 'Apple Mail' };
const m5Click = { id: positionOf('c'), message_id: '2001', contact_id: 601, campaign_id: 11, clicked_at: D0 + 7400, url, user_agent_id: UA_ID.chrome, ua_platform: 'Windows', ua_client: 'Chrome' };

const messageTimeMoves: Scenario = {
  name: 'statcounters: open and click before sent, then an earlier delivery event arriving last',
  tenant: '102',
  steps: [
    {
      append: [m5('open', 'o', D0 + 7300, { agent: UA_MAIL }), m5('click', 'c', D0 + 7400, { url, agent: UA_CHROME })],
      then: [
        // No delivery event: counted in Lifetime and Event timing, held back from Message timing; no delays.
        { table: 'statcounters', where: { source_type: 'A', resolution: 'L' }, rows: [{ timing: 'L', timeslice: 0, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1 }] },
        { table: 'statcounters', where: { source_type: 'A', resolution: 'H' }, rows: [{ timing: 'E', timeslice: D0 + 2 * HOUR, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1 }] },
        { table: 'statcounters', where: { source_type: 'A', timing: 'M' }, rows: [] },
        { table: 'messages', rows: [{ ...m5Message, message_time: null, attempt_count: 0, event_count: 2 }] },
        { table: 'open_info', rows: [{ ...m5Open, arrived_at: null }] },
        { table: 'click_stats', rows: [{ ...m5Click, clicked_delay: null }] },
        { table: 'campaign_stats', rows: [{ campaign_id: 11, opened: 1, clicked: 1, first_message_time: null }] },
        // Opened and clicked, not attempted: in the counts, not in the open rate's share.
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', opened: 1, clicked: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', opened: 1, clicked: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
      ],
    },
    {
      append: [m5('sent', 's', D0 + 3700)],
      then: [
        { table: 'statcounters', where: { source_type: 'A', resolution: 'L' }, rows: [{ timing: 'L', timeslice: 0, total: 1, message_sent: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 3600, event_click_delay: 3700 }] },
        {
          table: 'statcounters',
          where: { source_type: 'A', resolution: 'H' },
          rows: [
            { timing: 'M', timeslice: D0 + HOUR, total: 1, message_sent: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 3600, event_click_delay: 3700 },
            { timing: 'E', timeslice: D0 + HOUR, total: 1, message_sent: 1 },
            { timing: 'E', timeslice: D0 + 2 * HOUR, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 3600, event_click_delay: 3700 },
          ],
        },
        {
          table: 'statcounters',
          where: { source_type: 'A', resolution: 'S' },
          rows: [
            { timing: 'M', timeslice: D0 + 3600, total: 1, message_sent: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 3600, event_click_delay: 3700 },
            { timing: 'E', timeslice: D0 + 3600, total: 1, message_sent: 1 },
            { timing: 'E', timeslice: D0 + 7200, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 3600, event_click_delay: 3700 },
          ],
        },
        { table: 'messages', rows: [{ ...m5Message, message_time: D0 + 3700, attempt_count: 1, event_count: 3 }] },
        { table: 'open_info', rows: [{ ...m5Open, arrived_at: D0 + 3700 }] },
        { table: 'click_stats', rows: [{ ...m5Click, clicked_delay: 3700 }] },
        { table: 'campaign_stats', rows: [{ campaign_id: 11, processed: 1, delivered: 1, opened: 1, clicked: 1, first_message_time: D0 + 3700 }] },
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', attempted: 1, delivered: 1, opened: 1, clicked: 1, opened_of_attempted: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', processed: 1, delivered: 1, opened: 1, clicked: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
      ],
    },
    {
      append: [m5('queued', 'q', D0 + 100)],
      then: [
        // Message time D0+100: the Message-timing row moves to hour 0, delays grow by 3600, Total moves.
        { table: 'statcounters', where: { source_type: 'A', resolution: 'L' }, rows: [{ timing: 'L', timeslice: 0, total: 1, message_sent: 1, message_queued: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 7200, event_click_delay: 7300 }] },
        {
          table: 'statcounters',
          where: { source_type: 'A', resolution: 'H' },
          rows: [
            { timing: 'M', timeslice: D0, total: 1, message_sent: 1, message_queued: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 7200, event_click_delay: 7300 },
            { timing: 'E', timeslice: D0, total: 1, message_queued: 1 },
            { timing: 'E', timeslice: D0 + HOUR, message_sent: 1 },
            { timing: 'E', timeslice: D0 + 2 * HOUR, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 7200, event_click_delay: 7300 },
          ],
        },
        {
          table: 'statcounters',
          where: { source_type: 'C', source_id: 11, resolution: 'D' },
          rows: (['M', 'E'] as const).map((timing) => ({
            timing,
            timeslice: D0,
            total: 1, message_sent: 1, message_queued: 1, message_opened: 1, message_clicked: 1, event_opened: 1, event_clicked: 1, event_open_delay: 7200, event_click_delay: 7300,
          })),
        },
        // A queued is no attempt; ArrivedAt stays the first `sent`.
        { table: 'messages', rows: [{ ...m5Message, message_time: D0 + 100, attempt_count: 1, event_count: 4 }] },
        { table: 'open_info', rows: [{ ...m5Open, arrived_at: D0 + 3700 }] },
        { table: 'click_stats', rows: [{ ...m5Click, clicked_delay: 7300 }] },
        { table: 'campaign_stats', rows: [{ campaign_id: 11, processed: 1, delivered: 1, opened: 1, clicked: 1, first_message_time: D0 + 100 }] },
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', attempted: 1, delivered: 1, opened: 1, clicked: 1, opened_of_attempted: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', processed: 1, queued: 1, delivered: 1, opened: 1, clicked: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
      ],
    },
  ],
};

// Tenant 103: a message without campaign; an open hours late lands in an old slice; duplicates.
const m6 = message('3001', { email: 'fox@example.org', mj_contact_id: 901 });

const m6Message = { message_id: '3001', contact_id: 901, email: 'fox@example.org', recipient_domain: 'example.org', esp: 'others', message_time: D0 + 100, status: 'opened', last_activity_at: D0 + 10 * HOUR, attempt_count: 1 };
const proxyOpens = { event: 'open', platform: 'Other', client: 'Gmail Image Proxy', count: 1, distinct_count: 1 };

const lateAndDuplicate: Scenario = {
  name: 'statcounters: an open hours late lands in its old slice and becomes the first open; duplicates stored once',
  tenant: '103',
  steps: [
    {
      append: [m6('sent', 's', D0 + 100), m6('open', 'o1', D0 + 10 * HOUR, { agent: UA_PROXY, geo: 'fr' })],
      then: [
        {
          table: 'statcounters',
          where: { source_type: 'A', resolution: 'H' },
          rows: [
            { timing: 'M', timeslice: D0, total: 1, message_sent: 1, message_opened: 1, event_opened: 1, event_open_delay: 35_900 },
            { timing: 'E', timeslice: D0, total: 1, message_sent: 1 },
            { timing: 'E', timeslice: D0 + 10 * HOUR, message_opened: 1, event_opened: 1, event_open_delay: 35_900 },
          ],
        },
        {
          table: 'open_info',
          rows: [{ message_id: '3001', id: positionOf('o1'), contact_id: 901, opened_at: D0 + 10 * HOUR, arrived_at: D0 + 100, user_agent_id: UA_ID.proxy, user_agent_full: UA_PROXY, ua_platform: 'Other', ua_client: 'Gmail Image Proxy' }],
        },
        { table: 'user_agent_stats', rows: [proxyOpens] },
        { table: 'geo_stats', rows: [{ country: 'FR', opened_events: 1, opened_messages: 1 }] },
        { table: 'messages', rows: [{ ...m6Message, first_open_at: D0 + 10 * HOUR, event_count: 2 }] },
        { table: 'campaign_stats', rows: [] },
        { table: 'recipient_esp_stats', rows: [] },
      ],
    },
    {
      append: [
        m6('open', 'o0', D0 + 1000, { agent: UA_MAIL, geo: 'US' }),
        m6('sent', 's', D0 + 100),
        m6('open', 'o1', D0 + 10 * HOUR, { agent: UA_PROXY, geo: 'fr' }),
      ],
      then: [
        {
          table: 'statcounters',
          where: { source_type: 'A', resolution: 'H' },
          rows: [
            { timing: 'M', timeslice: D0, total: 1, message_sent: 1, message_opened: 1, event_opened: 2, event_open_delay: 900 },
            { timing: 'E', timeslice: D0, total: 1, message_sent: 1, message_opened: 1, event_opened: 1, event_open_delay: 900 },
            { timing: 'E', timeslice: D0 + 10 * HOUR, event_opened: 1 },
          ],
        },
        { table: 'statcounters', where: { source_type: 'A', timing: 'L' }, rows: [{ resolution: 'L', timeslice: 0, total: 1, message_sent: 1, message_opened: 1, event_opened: 2, event_open_delay: 900 }] },
        { table: 'statcounters', where: { source_type: 'C' }, rows: [] },
        {
          table: 'open_info',
          rows: [{ message_id: '3001', id: positionOf('o0'), contact_id: 901, opened_at: D0 + 1000, arrived_at: D0 + 100, user_agent_id: UA_ID.mail, user_agent_full: UA_MAIL, ua_platform: 'iOS', ua_client: 'Apple Mail' }],
        },
        { table: 'user_agent_stats', rows: [proxyOpens, { event: 'open', platform: 'iOS', client: 'Apple Mail', count: 1, distinct_count: 1 }] },
        {
          table: 'geo_stats',
          rows: [
            { country: 'FR', opened_events: 1, opened_messages: 1 },
            { country: 'US', opened_events: 1, opened_messages: 1 },
          ],
        },
        { table: 'messages', rows: [{ ...m6Message, first_open_at: D0 + 1000, event_count: 3 }] },
        { table: 'contact_stats', rows: [{ email: 'fox@example.org', processed: 1, delivered: 1, opened: 1, contact_id: 901, last_activity_at: D0 + 10 * HOUR }] },
      ],
    },
  ],
};

export const TRAP_SCENARIOS: readonly Scenario[] = [messageTimeMoves, lateAndDuplicate];
