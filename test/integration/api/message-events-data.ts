import { sql } from 'kysely';
import type { ApiFixture } from '../../support/api.js';
import { UA_CHROME, UA_MAIL } from '../../unit/projections/scenarios/common.js';

/**
 * Known events for the message-event resources (bouncestatistics, clickstatistics,
 * openinformation, message, messagehistory), in Mailjet's callback shapes. Tenant `a` has five
 * messages over two campaigns and a transactional one; tenant `b` reuses two of its message ids.
 * Every expected body in the tests is written by hand from these.
 */

/** 2023-11-14T22:13:20Z. */
export const T0 = 1_700_000_000;
/** T0 + 10 days: 2023-11-24T22:13:20Z. */
export const D10 = T0 + 10 * 86_400;
/** Above 2^53: must come back exact. */
export const BIG = '19421777835146490';
export const BIG_N = 19421777835146490n;
export const GUID = '1ab23cd4-e567-4901-a345-6789f0ab1c2d';
export const SALE_URL = 'https://shop.example/sale?utm_source=mj&b=2&a=1';

const event = (messageId: string, dims: Record<string, unknown>) => (type: string, id: string, time: number, extra: Record<string, unknown> = {}) => ({
  event: type,
  EventID: id,
  time,
  MessageID: messageId,
  ...dims,
  ...extra,
});

const spring = { mj_campaign_id: 7, mj_list_id: 3, mj_sender_id: 9, sender: 'news@shop.example' };
const autumn = { mj_campaign_id: 8, mj_sender_id: 5, sender: 'info@other.example', customcampaign: 'autumn-push' };
const ann = event(BIG, { ...spring, mj_contact_id: 11, email: 'ann@gmail.com', Message_GUID: GUID, CustomID: 'order-1' });
const bob = event('2', { ...spring, mj_contact_id: 12, email: 'Bob@Yahoo.com', Message_GUID: 'guid-2' });
const cy = event('3', { ...autumn, mj_contact_id: 13, email: 'cy@hotmail.com', Message_GUID: 'guid-3' });
const dee = event('4', { mj_contact_id: 14, email: 'dee@gmail.com' });
const eve = event('5', { ...autumn, mj_contact_id: 15, email: 'eve@gmail.com', Message_GUID: 'guid-5' });

export const EVENTS_A: Record<string, unknown>[] = [
  { event: 'campaign', EventID: 'camp7', time: T0 - 3600, mj_campaign_id: 7, Title: 'Spring', Subject: 'Spring sale', IDType: 'Campaign', Status: 2, SendTimeStart: T0 - 3600, Starred: true },
  { event: 'campaign', EventID: 'camp8', time: D10 - 100, mj_campaign_id: 8, Title: 'Autumn', Subject: 'Autumn news', IDType: 'Campaign', Status: 2, SendTimeStart: D10 - 100, Starred: false },
  ann('queued', 'q1', T0 - 2),
  ann('bounce', 'b1', T0 - 1, { hard_bounce: false, blocked: false, error_related_to: 'domain', error: 'greylisted', comment: 'greylisted, try later' }),
  ann('sent', 's1', T0, { mj_message_id: BIG, smtp_reply: 'sent (250 2.0.0 OK)' }),
  ann('open', 'o1', T0 + 60, { ip: '1.2.3.4', geo: 'FR', agent: UA_CHROME }),
  ann('click', 'c1', T0 + 120, { url: SALE_URL, ip: '1.2.3.4', geo: 'FR', agent: UA_CHROME }),
  ann('click', 'c2', T0 + 200, { url: 'https://shop.example/about', ip: '1.2.3.4', geo: 'FR', agent: UA_MAIL }),
  ann('open', 'o2', T0 + 90_000, { ip: '1.2.3.4', geo: 'FR', agent: UA_MAIL }),
  bob('sent', 's2', T0 + 10),
  bob('bounce', 'b2a', T0 + 15, { hard_bounce: false, blocked: false, error_related_to: 'recipient', error: 'quota exceeded' }),
  bob('bounce', 'b2b', T0 + 20, { hard_bounce: true, blocked: true, error_related_to: 'recipient', error: 'user unknown', comment: 'Host or domain name not found' }),
  cy('sent', 's3', D10),
  cy('open', 'o3', D10 + 30, { ip: '5.6.7.8', geo: 'US', agent: UA_MAIL }),
  cy('click', 'c3', D10 + 40, { url: 'https://other.example/x', ip: '5.6.7.8', geo: 'US', agent: UA_MAIL }),
  cy('spam', 'sp3', D10 + 300, { source: 'JMRPP' }),
  cy('unsub', 'u3', D10 + 400, { mj_list_id: 1, ip: '5.6.7.8', geo: 'US', agent: 'List-Unsubscribe' }),
  dee('blocked', 'bl4', T0 + 5, { error_related_to: 'mailjet', error: 'preblocked', CustomID: 'dee-1' }),
  eve('queued', 'q5', D10 + 1),
  eve('deferred', 'd5', D10 + 2, { error_related_to: 'domain', error: 'greylisted', smtp_reply: '451 4.7.1 try later' }),
  eve('bounce', 'b5', D10 + 100, { hard_bounce: false, blocked: false, error_related_to: 'system', error: 'connection issue' }),
];

/** Tenant b: message ids 2 and BIG again, other contents, and an open with no delivery event. */
const zed = event('2', { mj_campaign_id: 7, mj_contact_id: 99, email: 'zed@gmail.com', Message_GUID: 'guid-b2' });
export const EVENTS_B: Record<string, unknown>[] = [
  zed('sent', 'bs2', T0),
  zed('bounce', 'bb2', T0 + 30, { hard_bounce: true, blocked: false, error_related_to: 'recipient', error: 'user unknown' }),
  zed('open', 'bo2', T0 + 40, { agent: UA_CHROME }),
  zed('click', 'bc2', T0 + 50, { url: 'https://b.example/', agent: UA_CHROME }),
  // Same time as the click: the history puts the open first (pipeline stage before EventID).
  zed('open', 'bz2', T0 + 50, { agent: UA_MAIL }),
  event(BIG, { mj_contact_id: 98, email: 'yan@gmail.com', CustomID: 'order-1' })('sent', 'bsBIG', T0),
  // An open whose message's delivery events have not arrived (yet).
  event('6', { mj_contact_id: 97, email: 'xu@gmail.com', CustomID: 'xu-1' })('open', 'bo6', T0 + 70, { agent: UA_MAIL }),
];

/** Loads both tenants' events; returns the log position of every event by its EventID and tenant. */
export async function loadMessageEvents(f: ApiFixture): Promise<{ a: Record<string, number>; b: Record<string, number> }> {
  await f.given(f.keys.a, EVENTS_A);
  await f.given(f.keys.b, EVENTS_B);
  const positions = async (apiKeyId: string) => {
    const { rows } = await sql<{ event_id: string; position: bigint }>`SELECT event_id, position FROM events WHERE api_key_id = ${apiKeyId}::int8`.execute(f.db.kysely);
    return Object.fromEntries(rows.map((r) => [r.event_id, Number(r.position)]));
  };
  return { a: await positions(f.keys.a.APIKeyID), b: await positions(f.keys.b.APIKeyID) };
}

/** The `Data` of a list body. */
export const dataOf = (body: unknown): Record<string, unknown>[] => (body as { Data: Record<string, unknown>[] }).Data;
