import { API_KEY, bigints, col } from './kit/columns.js';
import { has } from './kit/distinct.js';
import { isAttempted, messageFacts } from './kit/message-facts.js';
import { hasSql, tOf } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';
import { OTHER_ESP } from '../src/events/enrich/esp.js';

/**
 * /statistics/recipient-esp: distinct-message counts per campaign and recipient ESP (from the
 * recipient's domain, classified at ingest). Attempted = processed and not blocked. Beside each
 * rate's numerator, the same count among the rate's denominator messages (`…_of_attempted`,
 * `…_of_opened`, `…_of_delivered`), from which the API derives the rates: a rate is the share of
 * its denominator's messages, never above 1 (an open whose `sent` has not arrived, a click with no
 * open, count in OpenedMessagesCount or ClickedMessagesCount but not in those shares).
 */
export const recipientEsp: Projection = {
  name: 'recipient-esp',
  version: 5,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'recipient_esp_stats',
      keys: [API_KEY, col('campaign_id', 'bigint'), col('esp', 'text')],
      sums: bigints(
        'attempted', 'delivered', 'opened', 'clicked', 'deferred', 'soft_bounced', 'hard_bounced', 'unsub', 'spam',
        'opened_of_attempted', 'clicked_of_opened', 'deferred_of_attempted', 'soft_bounced_of_attempted', 'hard_bounced_of_attempted', 'unsub_of_delivered', 'spam_of_delivered',
      ),
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.campaignId === '0') return;
    const c = f.count;
    const attempted = isAttempted(f) ? 1 : 0;
    const delivered = has(c.sent);
    const opened = has(c.opened);
    const clicked = has(c.clicked);
    const deferred = has(c.deferred);
    const soft = has(c.softBounced);
    const hard = has(c.hardBounced);
    const unsub = has(c.unsub);
    const spam = has(c.spam);
    const sums = [
      attempted, delivered, opened, clicked, deferred, soft, hard, unsub, spam,
      attempted & opened, opened & clicked, attempted & deferred, attempted & soft, attempted & hard, delivered & unsub, delivered & spam,
    ];
    // A blocked message counts nowhere here: emit nothing rather than a row of zeros (the live
    // projector would store it, a replay would not).
    if (sums.every((n) => n === 0)) return;
    out.add('recipient_esp_stats', [f.apiKeyId, f.campaignId, f.esp === '' ? OTHER_ESP : f.esp], sums);
  },
  sql: {
    recipient_esp_stats: `
      SELECT api_key_id, campaign_id, CASE WHEN esp = '' THEN '${OTHER_ESP}' ELSE esp END AS esp,
        attempted, delivered, opened, clicked, deferred, soft_bounced, hard_bounced, unsub, spam,
        attempted & opened AS opened_of_attempted, opened & clicked AS clicked_of_opened, attempted & deferred AS deferred_of_attempted,
        attempted & soft_bounced AS soft_bounced_of_attempted, attempted & hard_bounced AS hard_bounced_of_attempted,
        delivered & unsub AS unsub_of_delivered, delivered & spam AS spam_of_delivered
      FROM (
        SELECT api_key_id, campaign_id, esp,
          (message_time IS NOT NULL AND ${tOf('blocked')} IS NULL)::int AS attempted, ${hasSql('sent')} AS delivered, ${hasSql('opened')} AS opened,
          ${hasSql('clicked')} AS clicked, ${hasSql('deferred')} AS deferred, ${hasSql('softBounced')} AS soft_bounced,
          ${hasSql('hardBounced')} AS hard_bounced, ${hasSql('unsub')} AS unsub, ${hasSql('spam')} AS spam
        FROM facts WHERE campaign_id <> 0
      ) m`,
  },
};
