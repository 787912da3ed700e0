import { positionOf, type Scenario } from '../../../support/projections.js';
import { D0, message } from './common.js';

/** Hard vs soft bounces, blocked messages, and a bounce that says `blocked`, on every table they touch. */

// Tenant 104, campaign 12.
const campaign = { mj_campaign_id: 12 };
const soft = message('4001', { ...campaign, email: 'fay@yahoo.com', mj_contact_id: 701 });
const hard = message('4002', { ...campaign, email: 'gus@gmail.com', mj_contact_id: 702 });
const blocked = message('4003', { ...campaign, email: 'hal@gmail.com', mj_contact_id: 703 });
const blockedBounce = message('4004', { ...campaign, email: 'ivy@gmail.com', mj_contact_id: 704 });
// Campaign 15's only message is blocked: nothing to count per ESP (no row, not a row of zeros).
const blockedOnly = message('4005', { mj_campaign_id: 15, email: 'jo@gmail.com', mj_contact_id: 705 });

const bounces: Scenario = {
  name: 'bounces: hard vs soft, blocked, state ids',
  tenant: '104',
  steps: [
    {
      append: [
        soft('queued', 'q1', D0 + 100),
        soft('bounce', 'b1', D0 + 200, { hard_bounce: false, blocked: false, error_related_to: 'domain', error: 'greylisted' }),
        hard('bounce', 'b2', D0 + 300, { hard_bounce: true, error_related_to: 'recipient', error: 'user unknown' }),
        blocked('blocked', 'bl3', D0 + 400, { error_related_to: 'mailjet', error: 'preblocked' }),
        blockedBounce('bounce', 'b4', D0 + 500, { hard_bounce: true, blocked: true, error_related_to: 'mailjet', error: 'spam preblocked' }),
        blockedOnly('blocked', 'bl5', D0 + 600, { error_related_to: 'recipient', error: 'blacklisted' }),
      ],
      then: [
        {
          table: 'bounce_stats',
          rows: [
            { id: positionOf('b1'), message_id: '4001', contact_id: 701, campaign_id: 12, bounced_at: D0 + 200, is_blocked: false, is_state_permanent: false, state_id: 13, error_related_to: 'domain', error: 'greylisted' },
            { id: positionOf('b2'), message_id: '4002', contact_id: 702, campaign_id: 12, bounced_at: D0 + 300, is_blocked: false, is_state_permanent: true, state_id: 1, error_related_to: 'recipient', error: 'user unknown' },
            { id: positionOf('b4'), message_id: '4004', contact_id: 704, campaign_id: 12, bounced_at: D0 + 500, is_blocked: true, is_state_permanent: true, state_id: 16, error_related_to: 'mailjet', error: 'spam preblocked' },
          ],
        },
        {
          // A bounce flagged `blocked` is still a (hard) bounce, not a blocked message.
          table: 'statcounters',
          where: { source_type: 'A', timing: 'L' },
          rows: [{ resolution: 'L', timeslice: 0, total: 5, message_queued: 1, message_blocked: 2, message_hard_bounced: 2, message_soft_bounced: 1 }],
        },
        {
          table: 'recipient_esp_stats',
          rows: [
            { campaign_id: 12, esp: 'Yahoo', attempted: 1, soft_bounced: 1, soft_bounced_of_attempted: 1 },
            // hal's blocked message is not attempted
            { campaign_id: 12, esp: 'Gmail', attempted: 2, hard_bounced: 2, hard_bounced_of_attempted: 2 },
          ],
        },
        {
          table: 'campaign_stats',
          rows: [
            { campaign_id: 12, processed: 4, bounced: 3, blocked: 1, messages: 4, named: 4, first_message_time: D0 + 100 },
            { campaign_id: 15, processed: 1, blocked: 1, messages: 1, named: 1, first_message_time: D0 + 600 },
          ],
        },
        {
          table: 'contact_stats',
          rows: [
            { email: 'fay@yahoo.com', processed: 1, queued: 1, bounced: 1, soft_bounced: 1, messages: 1, named: 1, contact_id: 701, last_activity_at: D0 + 200 },
            { email: 'gus@gmail.com', processed: 1, bounced: 1, hard_bounced: 1, messages: 1, named: 1, contact_id: 702, last_activity_at: D0 + 300 },
            { email: 'hal@gmail.com', processed: 1, blocked: 1, messages: 1, named: 1, contact_id: 703, last_activity_at: D0 + 400 },
            { email: 'ivy@gmail.com', processed: 1, bounced: 1, hard_bounced: 1, messages: 1, named: 1, contact_id: 704, last_activity_at: D0 + 500 },
            { email: 'jo@gmail.com', processed: 1, blocked: 1, messages: 1, named: 1, contact_id: 705, last_activity_at: D0 + 600 },
          ],
        },
        {
          table: 'messages',
          rows: [
            { message_id: '4001', contact_id: 701, campaign_id: 12, email: 'fay@yahoo.com', recipient_domain: 'yahoo.com', esp: 'Yahoo', message_time: D0 + 100, status: 'softbounced', state_id: 13, is_state_permanent: false, last_activity_at: D0 + 200, attempt_count: 1, event_count: 2 },
            { message_id: '4002', contact_id: 702, campaign_id: 12, email: 'gus@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 300, status: 'hardbounced', state_id: 1, is_state_permanent: true, last_activity_at: D0 + 300, attempt_count: 1, event_count: 1 },
            { message_id: '4003', contact_id: 703, campaign_id: 12, email: 'hal@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 400, status: 'blocked', state_id: 14, is_state_permanent: true, last_activity_at: D0 + 400, attempt_count: 0, event_count: 1 },
            { message_id: '4004', contact_id: 704, campaign_id: 12, email: 'ivy@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 500, status: 'hardbounced', state_id: 16, is_state_permanent: true, last_activity_at: D0 + 500, attempt_count: 1, event_count: 1 },
            { message_id: '4005', contact_id: 705, campaign_id: 15, email: 'jo@gmail.com', recipient_domain: 'gmail.com', esp: 'Gmail', message_time: D0 + 600, status: 'blocked', state_id: 20, is_state_permanent: true, last_activity_at: D0 + 600, attempt_count: 0, event_count: 1 },
          ],
        },
        { table: 'click_stats', rows: [] },
        { table: 'open_info', rows: [] },
      ],
    },
  ],
};

export const BOUNCE_SCENARIOS: readonly Scenario[] = [bounces];
