import { maxId, maxText } from './ids.js';
import type { Group, LogEvent } from './types.js';

/**
 * The facts every message-level number is built from (projections/README.md, the numbers),
 * derived from the set of a message's events — never from their arrival order:
 * - message time: the smallest `time` among its delivery events; processed once it has one;
 * - a flag per kind of outcome, with the time of its first event (smallest time; ties by EventID);
 * - its campaign, contact, list, sender…: the largest non-empty value its events carry (events of
 *   one message normally agree; the rule only decides when some omit a field).
 */
export interface MessageFacts extends MessageDims {
  readonly apiKeyId: string;
  readonly messageId: string;
  /** Null until the message has a delivery event. */
  readonly messageTime: number | null;
  /** First event of each kind (null when none). */
  readonly first: Readonly<Record<Outcome, LogEvent | null>>;
  /** Number of events of each kind. */
  readonly count: Readonly<Record<Outcome, number>>;
  /** Largest event time. */
  readonly lastActivity: number;
  readonly events: readonly LogEvent[];
  /** Whether its events give more than one non-empty campaign, list, address (see `otherValues`). */
  readonly mixed: Readonly<Record<MixedDim, boolean>>;
}

/** The dimensions whose disagreement the read models with one-way columns look at. */
type MixedDim = 'campaignId' | 'listId' | 'email';

/** What a message is about: the same fields as on each of its events. */
export type MessageDims = Pick<
  LogEvent,
  'campaignId' | 'contactId' | 'listId' | 'senderId' | 'email' | 'recipientDomain' | 'esp' | 'sender' | 'senderDomain' | 'customCampaign'
>;

/** Pipeline order of the event types: of a message's events with the same time, the later stage is the latest. */
export const PIPELINE_RANK: Readonly<Record<LogEvent['type'], number>> = {
  campaign: 0,
  queued: 1,
  deferred: 2,
  sent: 3,
  bounce: 4,
  blocked: 4,
  open: 5,
  click: 6,
  spam: 7,
  unsub: 8,
};

export const OUTCOMES = [
  'queued',
  'sent',
  'deferred',
  'bounced',
  'hardBounced',
  'softBounced',
  'blocked',
  'opened',
  'clicked',
  'spam',
  'unsub',
] as const;
export type Outcome = (typeof OUTCOMES)[number];

const DELIVERY = new Set(['queued', 'sent', 'deferred', 'bounce', 'blocked']);

const QUEUED: readonly Outcome[] = ['queued'];
const SENT: readonly Outcome[] = ['sent'];
const DEFERRED: readonly Outcome[] = ['deferred'];
const HARD_BOUNCE: readonly Outcome[] = ['bounced', 'hardBounced'];
const SOFT_BOUNCE: readonly Outcome[] = ['bounced', 'softBounced'];
const BLOCKED: readonly Outcome[] = ['blocked'];
const OPENED: readonly Outcome[] = ['opened'];
const CLICKED: readonly Outcome[] = ['clicked'];
const SPAM: readonly Outcome[] = ['spam'];
const UNSUB: readonly Outcome[] = ['unsub'];
const NO_OUTCOME: readonly Outcome[] = [];

function outcomesOf(e: LogEvent): readonly Outcome[] {
  switch (e.type) {
    case 'queued':
      return QUEUED;
    case 'sent':
      return SENT;
    case 'deferred':
      return DEFERRED;
    case 'bounce':
      return e.hardBounce ? HARD_BOUNCE : SOFT_BOUNCE;
    case 'blocked':
      return BLOCKED;
    case 'open':
      return OPENED;
    case 'click':
      return CLICKED;
    case 'spam':
      return SPAM;
    case 'unsub':
      return UNSUB;
    default:
      return NO_OUTCOME;
  }
}

const FACTS = Symbol('facts');

/**
 * Facts of a message group, memoized on the group object (every projection reads the same),
 * so they live exactly as long as it does. (A weak map keyed by the group kept them alive
 * through young-generation collections, which then promoted them: the live projector's old
 * generation filled with them and its mark-compacts, each a stall, paused longer.)
 */
export function messageFacts(group: Group): MessageFacts {
  const holder = group as Group & { [FACTS]?: MessageFacts };
  let facts = holder[FACTS];
  if (facts === undefined) {
    facts = computeFacts(group);
    if (Object.isExtensible(group)) holder[FACTS] = facts;
  }
  return facts;
}

function computeFacts(group: Group): MessageFacts {
  const first: Record<Outcome, LogEvent | null> = {
    queued: null,
    sent: null,
    deferred: null,
    bounced: null,
    hardBounced: null,
    softBounced: null,
    blocked: null,
    opened: null,
    clicked: null,
    spam: null,
    unsub: null,
  };
  const count: Record<Outcome, number> = {
    queued: 0,
    sent: 0,
    deferred: 0,
    bounced: 0,
    hardBounced: 0,
    softBounced: 0,
    blocked: 0,
    opened: 0,
    clicked: 0,
    spam: 0,
    unsub: 0,
  };
  let campaignId = '0';
  let contactId = '0';
  let listId = '0';
  let senderId = '0';
  let email = '';
  let recipientDomain = '';
  let esp = '';
  let sender = '';
  let senderDomain = '';
  let customCampaign = '';
  let messageTime: number | null = null;
  let lastActivity = 0;
  // The first non-empty value met of each, and whether another one follows.
  let aCampaign = '0';
  let aList = '0';
  let anEmail = '';
  let mixedCampaign = false;
  let mixedList = false;
  let mixedEmail = false;
  // Events arrive sorted by (time, eventId): the first of a kind is the first one met.
  for (const e of group.events) {
    if (e.campaignId !== '0') {
      if (aCampaign === '0') aCampaign = e.campaignId;
      else if (e.campaignId !== aCampaign) mixedCampaign = true;
    }
    if (e.listId !== '0') {
      if (aList === '0') aList = e.listId;
      else if (e.listId !== aList) mixedList = true;
    }
    if (e.email !== '') {
      if (anEmail === '') anEmail = e.email;
      else if (e.email !== anEmail) mixedEmail = true;
    }
    campaignId = maxId(campaignId, e.campaignId);
    contactId = maxId(contactId, e.contactId);
    listId = maxId(listId, e.listId);
    senderId = maxId(senderId, e.senderId);
    email = maxText(email, e.email);
    recipientDomain = maxText(recipientDomain, e.recipientDomain);
    esp = maxText(esp, e.esp);
    sender = maxText(sender, e.sender);
    senderDomain = maxText(senderDomain, e.senderDomain);
    customCampaign = maxText(customCampaign, e.customCampaign);
    if (DELIVERY.has(e.type) && messageTime === null) messageTime = e.time;
    if (e.time > lastActivity) lastActivity = e.time;
    for (const o of outcomesOf(e)) {
      count[o] += 1;
      first[o] ??= e;
    }
  }
  return {
    apiKeyId: group.apiKeyId,
    messageId: group.id,
    campaignId,
    contactId,
    listId,
    senderId,
    email,
    recipientDomain,
    esp,
    sender,
    senderDomain,
    customCampaign,
    messageTime,
    first,
    count,
    lastActivity,
    events: group.events,
    mixed: { campaignId: mixedCampaign, listId: mixedList, email: mixedEmail },
  };
}

/** Processed = has a delivery event. */
export function isProcessed(f: MessageFacts): boolean {
  return f.messageTime !== null;
}

/** Attempted (recipient-esp): processed and not blocked. */
export function isAttempted(f: MessageFacts): boolean {
  return f.messageTime !== null && f.count.blocked === 0;
}

/** Seconds from message time to an event, when the message time is known. */
export function delayOf(f: MessageFacts, e: LogEvent | null): number | null {
  return e === null || f.messageTime === null ? null : e.time - f.messageTime;
}

/** The dimensions the campaign filter block of the API filters on. */
export function campaignDims(f: MessageFacts): [string, string, string, string, string, string] {
  return [f.campaignId, f.listId, f.senderId, f.sender, f.senderDomain, f.customCampaign];
}

const NO_VALUES: readonly string[] = [];

/**
 * The values a message's events give one of its dimensions other than the one the message counts
 * under (`f[dim]`, the largest): each non-empty one once, in the order met. Empty when its events
 * agree, as they normally do.
 *
 * Read models whose rows keep a one-way column (a campaign's first message time, a recipient's
 * last activity) also give a row that the message's events name but that it does not count in
 * its part of that column: a later event can move the message to another row (a larger campaign
 * id), and a minimum or maximum cannot be taken back from the row it leaves. The rows an event
 * names only grow with the message's events, so each column depends only on the set of events
 * (projections/README.md, the numbers). Such rows count no message of their own until one
 * counts there (`messages` 0; the API lists only rows that count a message). What part a row
 * gets is each read model's (campaign-overview.ts, contact-statistics.ts,
 * list-recipient-statistics.ts).
 */
export function otherValues(f: MessageFacts, dim: MixedDim): readonly string[] {
  if (!f.mixed[dim]) return NO_VALUES;
  const chosen = f[dim];
  let seen: Set<string> | null = null;
  for (const e of f.events) {
    const v = e[dim];
    if (v === chosen || v === '' || v === '0') continue;
    (seen ??= new Set()).add(v);
  }
  return seen === null ? NO_VALUES : [...seen];
}
