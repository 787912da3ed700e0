import fc from 'fast-check';
import { D0, DAY, UA_CHROME, UA_MAIL, UA_PROXY } from './scenarios/common.js';

/**
 * Random event sets for property tests: several tenants, campaigns, lists and senders; messages
 * whose events randomly omit optional fields, and now and then an event naming another campaign,
 * list or address than the rest of its message (which then moves to the largest); every event type,
 * times spread over three days (so opens before their `sent` and late events are common);
 * campaign metadata events; duplicates (the same EventID again); shuffled.
 */

export interface TenantEvent {
  /** Index of the tenant within the run (the test maps it to a real tenant id). */
  readonly tenant: number;
  readonly event: Record<string, unknown>;
}

const TYPES = ['queued', 'sent', 'deferred', 'bounce', 'blocked', 'open', 'click', 'spam', 'unsub'] as const;
const EMAILS = ['a@gmail.com', 'b@hotmail.fr', 'c@yahoo.com', 'd@example.org', 'e@icloud.com', 'A@Gmail.com'];
const URLS = ['https://shop.example.com/sale?utm_source=x', 'https://shop.example.com/about', 'https://Example.org/p?b=2&a=1'];
const AGENTS = [UA_MAIL, UA_PROXY, UA_CHROME, 'List-Unsubscribe'];
const GEOS = ['FR', 'us', 'DE'];
const ERRORS: readonly [string, string][] = [
  ['recipient', 'user unknown'],
  ['domain', 'greylisted'],
  ['mailjet', 'preblocked'],
  ['system', 'something odd'],
];

const messageArb = fc.record({
  tenant: fc.integer({ min: 0, max: 2 }),
  /** Some ids above 2^53. */
  big: fc.boolean(),
  campaign: fc.constantFrom(0, 1, 2, 3),
  list: fc.constantFrom(0, 5, 6),
  sender: fc.constantFrom(0, 7, 8),
  contact: fc.integer({ min: 0, max: 4 }),
  email: fc.constantFrom(...EMAILS),
  from: fc.constantFrom(undefined, 'news@shop.example.com', 'info@example.org'),
  custom: fc.constantFrom(undefined, 'spring', 'fall'),
  events: fc.array(
    fc.record({
      type: fc.constantFrom(...TYPES),
      offset: fc.integer({ min: 0, max: 3 * DAY }),
      /** Which optional dimensions this event omits (bit mask). */
      omit: fc.integer({ min: 0, max: 63 }),
      pick: fc.nat(11),
      flag: fc.boolean(),
      flag2: fc.boolean(),
      /** Now and then an event names another campaign, list or address than its message's others. */
      other: fc.option(fc.record({ campaign: fc.constantFrom(1, 2, 3), list: fc.constantFrom(5, 6), email: fc.constantFrom(...EMAILS), which: fc.integer({ min: 1, max: 7 }) }), { freq: 6 }),
    }),
    { minLength: 0, maxLength: 8 },
  ),
});

const campaignEventArb = fc.record({
  tenant: fc.integer({ min: 0, max: 2 }),
  campaign: fc.constantFrom(1, 2, 3),
  offset: fc.integer({ min: 0, max: 3 * DAY }),
  title: fc.constantFrom(undefined, 'Spring', 'Fall'),
  subject: fc.constantFrom(undefined, 'Sale', 'News'),
  status: fc.constantFrom(undefined, 0, 1, 2),
  starred: fc.constantFrom(undefined, true, false),
});

type MessageSpec = typeof messageArb extends fc.Arbitrary<infer T> ? T : never;

function messageEvents(index: number, m: MessageSpec): TenantEvent[] {
  const messageId = m.big ? `${18_446_744_073_709_000_000n + BigInt(index)}` : String(1000 + index);
  const optional: [string, unknown][] = [
    ['mj_campaign_id', m.campaign],
    ['mj_list_id', m.list],
    ['mj_sender_id', m.sender],
    ['mj_contact_id', m.contact],
    ['sender', m.from],
    ['customcampaign', m.custom],
  ];
  return m.events.map((e, i) => {
    const event: Record<string, unknown> = { event: e.type, EventID: `m${index}-${i}`, time: D0 + e.offset, MessageID: messageId, email: m.email };
    optional.forEach(([field, value], bit) => {
      if (value !== undefined && (e.omit & (1 << bit)) === 0) event[field] = value;
    });
    if (e.other !== null) {
      if ((e.other.which & 1) !== 0) event['mj_campaign_id'] = e.other.campaign;
      if ((e.other.which & 2) !== 0) event['mj_list_id'] = e.other.list;
      if ((e.other.which & 4) !== 0) event['email'] = e.other.email;
    }
    const [relatedTo, error] = ERRORS[e.pick % ERRORS.length] as [string, string];
    if (e.type === 'open' || e.type === 'click' || e.type === 'unsub') {
      if (e.flag) event['agent'] = AGENTS[e.pick % AGENTS.length];
      if (e.flag2) event['geo'] = GEOS[e.pick % GEOS.length];
    }
    if (e.type === 'click') event['url'] = URLS[e.pick % URLS.length];
    if (e.type === 'bounce') Object.assign(event, { hard_bounce: e.flag, blocked: e.flag2, error_related_to: relatedTo, error });
    if (e.type === 'blocked' || e.type === 'deferred') Object.assign(event, { error_related_to: relatedTo, error });
    return { tenant: m.tenant, event };
  });
}

export const eventSetArb: fc.Arbitrary<TenantEvent[]> = fc
  .tuple(fc.array(messageArb, { minLength: 1, maxLength: 30 }), fc.array(campaignEventArb, { maxLength: 6 }), fc.array(fc.nat(), { maxLength: 25 }))
  .map(([messages, campaigns, duplicates]) => {
    const events = messages.flatMap((m, i) => messageEvents(i, m));
    campaigns.forEach((c, i) => {
      const event: Record<string, unknown> = { event: 'campaign', EventID: `c${i}`, time: D0 + c.offset, mj_campaign_id: c.campaign };
      if (c.title !== undefined) event['Title'] = c.title;
      if (c.subject !== undefined) event['Subject'] = c.subject;
      if (c.status !== undefined) event['Status'] = c.status;
      if (c.starred !== undefined) event['Starred'] = c.starred;
      events.push({ tenant: c.tenant, event });
    });
    if (events.length > 0) for (const d of duplicates) events.push(events[d % events.length] as TenantEvent);
    return events;
  })
  .chain((events) => fc.shuffledSubarray(events, { minLength: events.length, maxLength: events.length }));

/** Cut points splitting `n` events into consecutive batches. */
export function batchesOf<T>(items: readonly T[], cuts: readonly number[]): T[][] {
  const points = [...new Set(cuts.map((c) => c % (items.length + 1)))].sort((a, b) => a - b);
  const out: T[][] = [];
  let from = 0;
  for (const p of [...points, items.length]) {
    if (p > from) out.push(items.slice(from, p));
    from = Math.max(from, p);
  }
  return out;
}
