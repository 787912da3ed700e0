import * as P from './event-pools.js';

/**
 * A deterministic, seeded stream of raw events in Mailjet's callback shapes, as producers would
 * publish them: messages of several tenants' campaigns interleaved, each message going through
 * queued → sent (or deferred first, or bounce / blocked instead), then ~30% opened (some
 * several times), ~8% clicked, a few spam reports and unsubscribes; now and then a campaign
 * event. MessageIDs are above 2^53 and written as bare JSON integers; every event has an
 * EventID; about `duplicateRate` of the output repeats an earlier event exactly.
 *
 * Where duplicates fall: producers set Nats-Msg-Id, so a resend within the stream's 2-minute
 * duplicate window never reaches ingest; the ones that do are late (webhook retries, replays),
 * i.e. far back. `far` (default) repeats an event drawn uniformly from all earlier ones
 * (reservoir sample); `near` repeats one of the last few thousand, the worst case for an
 * append path that checks for duplicates before taking the append lock.
 */

export interface GeneratedEvent {
  /** The tenant, i.e. the APIKeyID in the subject (the body carries none). */
  apiKeyId: string;
  event: string;
  /** The event's JSON text, as published. */
  text: string;
  eventId: string;
}

export interface GenerateOptions {
  count: number;
  seed?: number;
  /** APIKeyIDs to spread the traffic over, biggest tenant first. */
  tenants?: readonly string[];
  duplicateRate?: number;
  duplicates?: 'far' | 'near';
  /** Seconds between two messages' first events (default 0.05: 20 messages a second). */
  secondsPerMessage?: number;
}

type Rng = () => number;
type Fields = Record<string, string | number | boolean>;

interface Campaign { id: number; tenant: string; custom: string; links: readonly string[]; left: number }
interface Message { campaign: Campaign; id: bigint; guid: string; email: string; contact: number; customId: string; payload: string; events: Fields[]; next: number }

export const DEFAULT_TENANTS: readonly string[] = ['1', '2', '3', '4', '5', '6'];
const ACTIVE_MESSAGES = 2000;
const NEAR = 4096;
const RESERVOIR = 65_536;
const BASE_TIME = Date.UTC(2026, 10, 1) / 1000;
const BASE_MESSAGE_ID = 19_421_777_835_146_490n;

/** mulberry32: small, fast, good enough for test data. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function picker<T>(r: Rng, pool: P.Weighted<T>): () => T {
  const total = pool.reduce((s, [, w]) => s + w, 0);
  return () => {
    let x = r() * total;
    for (const [v, w] of pool) if ((x -= w) < 0) return v;
    return (pool[pool.length - 1] as readonly [T, number])[0];
  };
}

const int = (r: Rng, n: number): number => Math.floor(r() * n);
const oneOf = <T>(r: Rng, list: readonly T[]): T => list[int(r, list.length)] as T;
const hex8 = (r: Rng): string => int(r, 4_294_967_296).toString(16).padStart(8, '0');
function uuid(r: Rng): string {
  const [a, b, c, d] = [hex8(r), hex8(r), hex8(r), hex8(r)];
  return `${a}-${b.slice(0, 4)}-4${b.slice(5)}-${'89ab'[int(r, 4)]}${c.slice(1, 4)}-${c.slice(4)}${d}`;
}
const ip = (r: Rng): string => `${1 + int(r, 223)}.${int(r, 256)}.${int(r, 256)}.${1 + int(r, 254)}`;
/** Exponentially distributed delay, in whole seconds. */
const delay = (r: Rng, mean: number): number => Math.max(1, Math.round(-Math.log(1 - r()) * mean));

export function* generateEvents(opts: GenerateOptions): Generator<GeneratedEvent> {
  const r = seededRng(opts.seed ?? 20261121);
  const tenants = opts.tenants ?? DEFAULT_TENANTS;
  const dupRate = opts.duplicateRate ?? 0.05;
  const near = opts.duplicates === 'near';
  const pickTenant = picker(r, tenants.map((t, i) => [t, 1 / (i + 1)] as const));
  const pickDomain = picker(r, P.DOMAINS);
  const pickOpenAgent = picker(r, P.OPEN_AGENTS);
  const pickBrowser = picker(r, P.BROWSER_AGENTS);
  const pickGeo = picker(r, P.GEOS);
  const pickFailure = picker(r, P.FAILURES);
  const current = new Map<string, Campaign>();
  const pending: GeneratedEvent[] = [];
  const recent: GeneratedEvent[] = [];
  let messages = 0;
  let campaigns = 0;
  let originals = 0;

  const email = (): string => {
    const domain = r() < P.CORPORATE_SHARE ? `${oneOf(r, P.WORDS)}-${int(r, 500)}.com` : pickDomain();
    return `${oneOf(r, P.FIRST_NAMES)}.${oneOf(r, P.LAST_NAMES)}${int(r, 1000)}@${domain}`;
  };

  const campaignFor = (tenant: string, t: number): Campaign => {
    const now = current.get(tenant);
    if (now !== undefined && now.left-- > 0) return now;
    const id = 7_100_000 + ++campaigns * 13;
    const site = `https://www.${oneOf(r, P.WORDS)}-shop.com/`;
    const utm = `utm_source=mailjet&utm_medium=email&utm_campaign=c${id}`;
    const links = P.LINK_PATHS.filter(() => r() < 0.6).map((p, i) => (i % 2 === 0 ? `${site}${p}?${utm}` : `${site}${p}?ref=nl&${utm}`));
    const c: Campaign = { id, tenant, custom: r() < 0.5 ? `mj.nl=${id}` : '', links: links.length > 0 ? links : [site], left: 500 + int(r, 3000) };
    current.set(tenant, c);
    const fields = { event: 'campaign', time: t - 600, mj_campaign_id: id, Title: `Newsletter ${campaigns}`, Subject: 'Our winter selection is here', IDType: 'Campaign', Status: 2, SendTimeStart: t, Starred: false, EditMode: 'html', EditType: 'full' };
    pending.push(finish(tenant, fields, null, uuid(r)));
    return c;
  };

  const newMessage = (): Message => {
    const t0 = BASE_TIME + Math.floor(messages * (opts.secondsPerMessage ?? 0.05));
    const tenant = pickTenant();
    const campaign = campaignFor(tenant, t0);
    const m: Message = {
      campaign, id: BASE_MESSAGE_ID + BigInt(messages++) * 7919n + BigInt(int(r, 7919)), guid: uuid(r), email: email(),
      contact: 1_000_000 + int(r, 4_000_000_000), customId: r() < 0.3 ? `order-${int(r, 1e7)}` : '',
      payload: r() < 0.15 ? `{"segment":"${oneOf(r, ['vip', 'new', 'dormant'])}","cart":${int(r, 500)}}` : '', events: [], next: 0,
    };
    const ev = (event: string, time: number, extra: Fields = {}) => m.events.push({ event, time, ...extra });
    ev('queued', t0);
    const outcome = r();
    if (outcome < 0.005) {
      const [rel, error] = pickFailure();
      ev('blocked', t0 + 1, { error_related_to: rel, error });
      return m;
    }
    if (outcome < 0.025) {
      const [rel, error] = pickFailure();
      ev('bounce', t0 + 2, { blocked: r() < 0.2, hard_bounce: rel === 'recipient' || rel === 'domain', error_related_to: rel, error, comment: P.BOUNCE_COMMENT });
      return m;
    }
    let sentAt = t0 + 1 + int(r, 5);
    if (outcome < 0.055) {
      ev('deferred', sentAt, { error_related_to: 'domain', error: 'greylisted', smtp_reply: P.DEFER_REPLY });
      sentAt += 300 + int(r, 600);
    }
    // mj_message_id is deprecated: only some senders' payloads still carry it.
    ev('sent', sentAt, r() < 0.3 ? { mj_message_id: m.id.toString(), smtp_reply: oneOf(r, P.SENT_REPLIES) } : { smtp_reply: oneOf(r, P.SENT_REPLIES) });
    const geo = pickGeo();
    const addr = ip(r);
    let t = sentAt;
    if (r() < 0.3) {
      do ev('open', (t += delay(r, 3600)), { ip: addr, geo, agent: pickOpenAgent() });
      while (r() < 0.35);
      // Now and then the open overtakes the sent event on its way to us.
      const s = m.events.findIndex((e) => e['event'] === 'sent');
      if (r() < 0.01) m.events.splice(s, 2, m.events[s + 1] as Fields, m.events[s] as Fields);
    }
    if (r() < 0.08) {
      const agent = pickBrowser();
      do ev('click', (t += delay(r, 300)), { url: oneOf(r, campaign.links), ip: addr, geo, agent });
      while (r() < 0.25);
    }
    if (r() < 0.003) ev('unsub', (t += delay(r, 60)), { mj_list_id: 1 + int(r, 20), ip: addr, geo, agent: r() < 0.6 ? 'List-Unsubscribe' : pickBrowser() });
    if (r() < 0.0008) ev('spam', t + delay(r, 86_400), { source: 'JMRPP' });
    return m;
  };

  const active = Array.from({ length: ACTIVE_MESSAGES }, newMessage);
  for (let emitted = 0; emitted < opts.count; emitted++) {
    let item = pending.shift();
    if (item === undefined && recent.length > 0 && r() < dupRate) item = oneOf(r, recent);
    if (item === undefined) {
      const i = int(r, active.length);
      const m = active[i] as Message;
      const fields = m.events[m.next++] as Fields;
      if (m.next >= m.events.length) active[i] = newMessage();
      item = finish(m.campaign.tenant, messageFields(m, fields), m.id, uuid(r));
      originals++;
      if (recent.length < (near ? NEAR : RESERVOIR)) recent.push(item);
      else if (near) recent[int(r, NEAR)] = item;
      else if (r() * originals < RESERVOIR) recent[int(r, RESERVOIR)] = item;
    }
    yield item;
  }
}

/** Mailjet's field order: event and time, the message's common fields, the type's own, then EventID. */
function messageFields(m: Message, fields: Fields): Fields {
  const { event, time, ...own } = fields;
  return {
    event: event as string, time: time as number, MessageID: m.id.toString(), Message_GUID: m.guid, email: m.email,
    mj_campaign_id: m.campaign.id, mj_contact_id: m.contact, customcampaign: m.campaign.custom, CustomID: m.customId, Payload: m.payload, ...own,
  };
}

function finish(apiKeyId: string, fields: Fields, messageId: bigint | null, eventId: string): GeneratedEvent {
  let text = JSON.stringify({ ...fields, EventID: eventId });
  if (messageId !== null) text = text.replace(`"MessageID":"${messageId}"`, `"MessageID":${messageId}`);
  return { apiKeyId, event: String(fields['event']), text, eventId };
}
