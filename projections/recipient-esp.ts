import { API_KEY, bigints, col } from './kit/columns.js';
import { has } from './kit/distinct.js';
import { isAttempted, messageFacts } from './kit/message-facts.js';
import { hasSql, tOf } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /statistics/recipient-esp: distinct-message counts per campaign and recipient ESP (from the
 * recipient's domain, classified at ingest). Attempted = processed and not blocked; the API
 * derives the rates from these counts.
 */
export const recipientEsp: Projection = {
  name: 'recipient-esp',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'recipient_esp_stats',
      keys: [API_KEY, col('campaign_id', 'bigint'), col('esp', 'text')],
      sums: bigints('attempted', 'delivered', 'opened', 'clicked', 'deferred', 'soft_bounced', 'hard_bounced', 'unsub', 'spam'),
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.campaignId === '0') return;
    const c = f.count;
    const sums = [isAttempted(f) ? 1 : 0, has(c.sent), has(c.opened), has(c.clicked), has(c.deferred), has(c.softBounced), has(c.hardBounced), has(c.unsub), has(c.spam)];
    // A blocked message counts nowhere here: emit nothing rather than a row of zeros (the live
    // projector would store it, a replay would not).
    if (sums.every((n) => n === 0)) return;
    out.add('recipient_esp_stats', [f.apiKeyId, f.campaignId, f.esp === '' ? 'others' : f.esp], sums);
  },
  sql: {
    recipient_esp_stats: `
      SELECT api_key_id, campaign_id, CASE WHEN esp = '' THEN 'others' ELSE esp END AS esp,
        (message_time IS NOT NULL AND ${tOf('blocked')} IS NULL)::int AS attempted, ${hasSql('sent')} AS delivered, ${hasSql('opened')} AS opened,
        ${hasSql('clicked')} AS clicked, ${hasSql('deferred')} AS deferred, ${hasSql('softBounced')} AS soft_bounced,
        ${hasSql('hardBounced')} AS hard_bounced, ${hasSql('unsub')} AS unsub, ${hasSql('spam')} AS spam
      FROM facts WHERE campaign_id <> 0`,
  },
};
