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
        { table: 'campaign_stats', rows: [{ campaign_id: 11, opened: 1, clicked: 1, messages: 1, named: 1, first_message_time: null }] },
        // Opened and clicked, not attempted: in the counts, not in the open rate's share.
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', opened: 1, clicked: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', opened: 1, clicked: 1, messages: 1, named: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
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
        { table: 'campaign_stats', rows: [{ campaign_id: 11, processed: 1, delivered: 1, opened: 1, clicked: 1, messages: 1, named: 1, first_message_time: D0 + 3700 }] },
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', attempted: 1, delivered: 1, opened: 1, clicked: 1, opened_of_attempted: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', processed: 1, delivered: 1, opened: 1, clicked: 1, messages: 1, named: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
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
        { table: 'campaign_stats', rows: [{ campaign_id: 11, processed: 1, delivered: 1, opened: 1, clicked: 1, messages: 1, named: 1, first_message_time: D0 + 100 }] },
        { table: 'recipient_esp_stats', rows: [{ campaign_id: 11, esp: 'Gmail', attempted: 1, delivered: 1, opened: 1, clicked: 1, opened_of_attempted: 1, clicked_of_opened: 1 }] },
        { table: 'contact_stats', rows: [{ email: 'eve@gmail.com', processed: 1, queued: 1, delivered: 1, opened: 1, clicked: 1, messages: 1, named: 1, contact_id: 601, last_activity_at: D0 + 7400 }] },
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
        { table: 'contact_stats', rows: [{ email: 'fox@example.org', processed: 1, delivered: 1, opened: 1, messages: 1, named: 1, contact_id: 901, last_activity_at: D0 + 10 * HOUR }] },
      ],
    },
  ],
};

// Tenants 107 and 108: the same events in two arrival orders. Message 7001's `sent` names
// campaign 5, list 21 and ann; its `unsub` names campaign 7, list 22 and bob, so it counts in the
// largest (7, 22, bob). Message 7002 counts in campaign 5, list 21, ann. Campaign 5 keeps 7001's
// message time; ann and (21, ann) keep what 7001's events that carry them say (its `sent`), and
// none of its counts, whichever event came first.
// list_recipient_id: stable id of 'list-recipient:<tenant>:<list>:<email>' (computed outside the code under test)
const RECIPIENT_IDS: Record<string, Record<string, string>> = {
  '107': { '21 ann': '117451934931617', '21 bob': '70516617190017', '22 ann': '43332600662584', '22 bob': '182897310522513' },
  '108': { '21 ann': '146066508625670', '21 bob': '14295380122452', '22 ann': '272360531619422', '22 bob': '247710282104944' },
};
const ANN = 'ann@example.org';
const BOB = 'bob@example.org';

function disagreeing(tenant: '107' | '108', movingEventFirst: boolean): Scenario {
  const m7 = message('7001', {});
  const m8 = message('7002', { email: ANN, mj_campaign_id: 5, mj_list_id: 21, mj_contact_id: 1001 });
  const sent = m7('sent', 's', D0 + 1000, { email: ANN, mj_campaign_id: 5, mj_list_id: 21, mj_contact_id: 1001 });
  const unsub = m7('unsub', 'u', D0 + 6000, { email: BOB, mj_campaign_id: 7, mj_list_id: 22, mj_contact_id: 1002 });
  const id = (list: number, who: 'ann' | 'bob') => RECIPIENT_IDS[tenant]?.[`${list} ${who}`] ?? '';
  return {
    name: `one-way columns: a message whose events disagree on campaign, list and address, the event that moves it arriving ${movingEventFirst ? 'first' : 'last'}`,
    tenant,
    steps: [
      {
        append: [movingEventFirst ? unsub : sent, m8('sent', 's2', D0 + 5000)],
        then: movingEventFirst
          ? [
              {
                table: 'campaign_stats',
                rows: [
                  { campaign_id: 5, processed: 1, delivered: 1, messages: 1, named: 1, first_message_time: D0 + 5000 },
                  { campaign_id: 7, unsub: 1, messages: 1, named: 1, first_message_time: null },
                ],
              },
            ]
          : [
              { table: 'campaign_stats', rows: [{ campaign_id: 5, processed: 2, delivered: 2, messages: 2, named: 2, first_message_time: D0 + 1000 }] },
              { table: 'contact_stats', rows: [{ email: ANN, processed: 2, delivered: 2, messages: 2, named: 2, contact_id: 1001, last_activity_at: D0 + 5000 }] },
            ],
      },
      {
        append: [movingEventFirst ? sent : unsub],
        then: [
          {
            table: 'campaign_stats',
            rows: [
              { campaign_id: 5, processed: 1, delivered: 1, messages: 1, named: 2, first_message_time: D0 + 1000 },
              { campaign_id: 7, processed: 1, delivered: 1, unsub: 1, messages: 1, named: 1, first_message_time: D0 + 1000 },
            ],
          },
          {
            table: 'contact_stats',
            rows: [
              { email: ANN, processed: 1, delivered: 1, messages: 1, named: 2, contact_id: 1001, last_activity_at: D0 + 5000 },
              { email: BOB, processed: 1, delivered: 1, unsub: 1, messages: 1, named: 1, contact_id: 1002, last_activity_at: D0 + 6000 },
            ],
          },
          {
            table: 'list_recipient_stats',
            rows: [
              { list_id: 21, email: ANN, processed: 1, delivered: 1, messages: 1, named: 2, list_recipient_id: id(21, 'ann'), contact_id: 1001, last_activity_at: D0 + 5000, unsubscribed_at: null },
              { list_id: 22, email: BOB, processed: 1, delivered: 1, unsub: 1, messages: 1, named: 1, list_recipient_id: id(22, 'bob'), contact_id: 1002, last_activity_at: D0 + 6000, unsubscribed_at: D0 + 6000 },
            ],
          },
        ],
      },
    ],
  };
}

// Tenant 109: message 7101's `sent` carries list 32 and ann, its `open` list 31 and bob. It counts
// under (32, bob), a pair no event of it carries: that row gets its counts alone; (32, ann) and
// (31, bob) get what their events say.
const m9 = message('7101', {});
const unpaired: Scenario = {
  name: 'one-way columns: a message counted under a list and an address no single event of it carries together',
  tenant: '109',
  steps: [
    {
      append: [m9('sent', 's', D0 + 100, { email: ANN, mj_list_id: 32, mj_contact_id: 2001 }), m9('open', 'o', D0 + 700, { email: BOB, mj_list_id: 31, mj_contact_id: 2002 })],
      then: [
        {
          table: 'contact_stats',
          rows: [
            { email: BOB, processed: 1, delivered: 1, opened: 1, messages: 1, named: 1, contact_id: 2002, last_activity_at: D0 + 700 },
            { email: ANN, messages: 0, named: 1, contact_id: 2001, last_activity_at: D0 + 100 },
          ],
        },
        {
          table: 'list_recipient_stats',
          rows: [
            // list_recipient_id: stable id of 'list-recipient:109:<list>:<email>' (computed outside the code under test)
            { list_id: 32, email: BOB, processed: 1, delivered: 1, opened: 1, messages: 1, named: 0, list_recipient_id: '35141076403261', contact_id: null, last_activity_at: null, unsubscribed_at: null },
            { list_id: 32, email: ANN, messages: 0, named: 1, list_recipient_id: '278165792245447', contact_id: 2001, last_activity_at: D0 + 100, unsubscribed_at: null },
            { list_id: 31, email: BOB, messages: 0, named: 1, list_recipient_id: '158687435263868', contact_id: 2002, last_activity_at: D0 + 700, unsubscribed_at: null },
          ],
        },
      ],
    },
  ],
};

// Tenant 110: one recipient written three ways. Addresses are folded (their ASCII letters in
// lower case) as the projections read them: one contact, and message 7203, whose `sent` and `open`
// spell it differently, is not a message of two addresses.
const kay = (id: string) => message(id, { mj_contact_id: 77 });
const caseFolded: Scenario = {
  name: 'contacts: an address that differs only in the case of its letters is one contact',
  tenant: '110',
  steps: [
    {
      append: [
        kay('7201')('sent', 'k1', D0 + 100, { email: 'Kay@X.org' }),
        kay('7202')('sent', 'k2', D0 + 200, { email: 'kay@x.org' }),
        kay('7203')('sent', 'k3', D0 + 300, { email: 'KAY@x.org' }),
        kay('7203')('open', 'k4', D0 + 900, { email: 'kay@X.ORG' }),
      ],
      then: [{ table: 'contact_stats', rows: [{ email: 'kay@x.org', processed: 3, delivered: 3, opened: 1, messages: 3, named: 3, contact_id: 77, last_activity_at: D0 + 900 }] }],
    },
  ],
};

export const TRAP_SCENARIOS: readonly Scenario[] = [messageTimeMoves, lateAndDuplicate, disagreeing('107', false), disagreeing('108', true), unpaired, caseFolded];
