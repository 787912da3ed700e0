import type { Db } from '../../src/db/connect.js';
import { decodeEventValue, type LogEventRow } from '../../src/events/decode.js';
import { appendEvents } from '../../src/log/append.js';
import { createCallbackUrl } from '../../src/webhooks/callback-url-store.js';

/**
 * Events and callback URLs for the webhook benchmark: each tenant has a URL for every one of
 * the seven types (all Version 1 or all Version 2); events are realistic Mailjet callbacks
 * (~450 bytes, 64-bit MessageIDs), the seven types in turn, tenants interleaved.
 */

export const TENANTS = ['1', '2', '3', '4', '5', '6', '7', '8'];
export const TYPES = ['sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub'] as const;
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148';

export async function createUrls(db: Db, tenants: readonly string[], version: 1 | 2, urlOf: (tenant: string, type: string) => string): Promise<void> {
  for (const t of tenants) for (const type of TYPES) await createCallbackUrl(db.kysely, t, { EventType: type, Url: urlOf(t, type), Version: version });
}

let serial = 0;

/** One raw event of `type` for `tenant`; `tag` makes its EventID unique. */
export function rawEvent(tenant: string, type: (typeof TYPES)[number], tag: string): Record<string, unknown> {
  const n = serial++;
  const common = {
    event: type,
    time: 1_790_000_000 + n,
    MessageID: (19_421_777_835_146_490n + BigInt(n)).toString(),
    Message_GUID: '1ab23cd4-e567-4901-a345-6789f0a1b2c3',
    email: `recipient${n}@example.com`,
    mj_campaign_id: 7257,
    mj_contact_id: 4 + n,
    customcampaign: 'spring-sale',
    CustomID: `order-${n}`,
    Payload: '',
    EventID: `${tag}-${tenant}-${n}`,
  };
  switch (type) {
    case 'sent':
      return { ...common, mj_message_id: common.MessageID, smtp_reply: 'sent (250 2.0.0 OK 1433333948 fa5si855896wjc.199 - gsmtp)' };
    case 'open':
      return { ...common, ip: '203.0.113.7', geo: 'FR', agent: UA };
    case 'click':
      return { ...common, url: 'https://example.com/spring?utm_source=mailjet', ip: '203.0.113.7', geo: 'FR', agent: UA };
    case 'bounce':
      return { ...common, blocked: false, hard_bounce: true, error_related_to: 'recipient', error: 'user unknown', comment: '550 5.1.1 user unknown' };
    case 'blocked':
      return { ...common, error_related_to: 'recipient', error: 'user unknown' };
    case 'spam':
      return { ...common, source: 'JMRPP' };
    case 'unsub':
      return { ...common, mj_list_id: 3, ip: '203.0.113.7', geo: 'FR', agent: 'List-Unsubscribe' };
  }
}

export function rows(tenant: string, events: readonly Record<string, unknown>[]): LogEventRow[] {
  return events.map((e) => {
    const r = decodeEventValue(e, { apiKeyId: tenant });
    if (!r.ok) throw new Error(`bad bench event: ${r.reason}`);
    return r.row;
  });
}

/** Appends `count` events spread over the tenants, in batches. */
export async function loadEvents(db: Db, tenants: readonly string[], count: number, tag: string): Promise<void> {
  const BATCH = 2000;
  for (let done = 0; done < count; done += BATCH) {
    const batch: LogEventRow[] = [];
    for (let i = done; i < Math.min(count, done + BATCH); i++) {
      const tenant = tenants[i % tenants.length] as string;
      batch.push(...rows(tenant, [rawEvent(tenant, TYPES[Math.floor(i / tenants.length) % TYPES.length] as (typeof TYPES)[number], tag)]));
    }
    await appendEvents(db.kysely, batch);
  }
}
