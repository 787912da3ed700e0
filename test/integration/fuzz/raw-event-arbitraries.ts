import fc from 'fast-check';
import { stringifyExactJson } from '../../../src/events/exact-json.js';
import { EVENT_TYPES, INT64_MAX, MAX_UNIX_SECONDS, UINT64_MAX } from '../../../src/events/schema.js';

/**
 * fast-check generators of raw events for the ingest fuzz tests: valid events of every type (all
 * their optional fields, unknown extras, 64-bit ids spelled every allowed way), and malformed
 * ones made from a valid event by one mutation that the contract (README, Sending events) refuses, each
 * with the name of what was broken. Every valid event carries a unique `fz` extra field, so two
 * of them are never the same event (derived EventIDs never collide by chance).
 */

export type Json = null | boolean | number | string | bigint | Json[] | { [key: string]: Json };

export interface ValueCase {
  valid: boolean;
  /** What was broken (for a malformed case) or `valid`. */
  why: string;
  value: Json;
  /** The event type named by the body, when there is one (for the NATS subject). */
  event: string;
}

type Obj = { [key: string]: Json };
type Mutation = { why: string; apply: (e: Obj) => Json };

let uid = 0;
const nextUid = (): string => `${process.pid}-${++uid}`;

const ascii = (maxLength: number) => fc.string({ unit: 'grapheme-ascii', maxLength });
/** Unicode text: no NUL, no lone surrogate (those are malformed cases of their own), short enough for any limit. */
const text = (maxLength: number) => fc.string({ unit: 'grapheme', maxLength }).filter((s) => !s.includes('\u0000') && s.length <= maxLength * 2);

const uint64 = fc.bigInt({ min: 0n, max: UINT64_MAX });
const int64 = fc.bigInt({ min: 0n, max: INT64_MAX });

/** A 64-bit id as the contract allows: bare number (exact when above 2^53), decimal string. */
const idSpelling = (n: fc.Arbitrary<bigint>) =>
  fc.tuple(n, fc.constantFrom('bare', 'string', 'padded')).map(([v, how]): Json => {
    if (how === 'string') return v.toString();
    if (how === 'padded') return ` ${v.toString()} `;
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  });

const extraKey = fc.stringMatching(/^x_[A-Za-z0-9_]{1,10}$/);
const extraValue: fc.Arbitrary<Json> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  ascii(20),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.stringMatching(/^[a-z]{1,5}$/), ascii(5), { maxKeys: 3 }),
  fc.bigInt({ min: 2n ** 60n, max: 2n ** 63n }),
);

function optional<T extends Json>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> {
  return fc.option(arb, { nil: undefined, freq: 2 });
}

function defined(o: Record<string, Json | undefined>): Obj {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Obj;
}

const COMMON_FIELDS = {
  EventID: optional(fc.stringMatching(/^[A-Za-z0-9:._-]{1,40}$/)),
  mj_campaign_id: optional(fc.oneof(idSpelling(int64), fc.constant(0), fc.constant(null))),
  mj_contact_id: optional(idSpelling(int64)),
  mj_list_id: optional(idSpelling(int64)),
  mj_sender_id: optional(idSpelling(int64)),
  sender: optional(fc.constantFrom('news@example.com', 'Ünïcode <u@exämple.org>', '')),
  Message_GUID: optional(fc.uuid()),
  customcampaign: optional(text(30)),
  CustomID: optional(text(30)),
  Payload: optional(text(60)),
};

const TYPE_FIELDS: Record<string, Record<string, fc.Arbitrary<Json | undefined>>> = {
  sent: { mj_message_id: optional(fc.bigInt({ min: 0n, max: 10n ** 19n }).map(String)), smtp_reply: optional(text(40)) },
  open: { ip: optional(fc.ipV4()), geo: optional(ascii(2)), agent: optional(text(60)) },
  click: { url: fc.webUrl(), ip: optional(fc.ipV6()), geo: optional(ascii(8)), agent: optional(text(60)) },
  bounce: {
    blocked: optional(fc.boolean()),
    hard_bounce: optional(fc.boolean()),
    error_related_to: optional(ascii(20)),
    error: optional(text(30)),
    comment: optional(text(80)),
  },
  blocked: { error_related_to: optional(ascii(20)), error: optional(text(30)) },
  spam: { source: optional(ascii(10)) },
  unsub: { ip: optional(fc.ipV4()), geo: optional(ascii(2)), agent: optional(text(30)) },
  queued: {},
  deferred: { error_related_to: optional(ascii(20)), error: optional(text(30)), smtp_reply: optional(text(40)) },
  campaign: {
    Title: optional(text(30)),
    Subject: optional(text(30)),
    IDType: optional(fc.constantFrom('Campaign', 'AX', 'NL')),
    Status: optional(fc.integer({ min: -3, max: 4 })),
    SendTimeStart: optional(fc.integer({ min: 0, max: MAX_UNIX_SECONDS })),
    Starred: optional(fc.boolean()),
    EditMode: optional(ascii(16)),
    EditType: optional(ascii(16)),
  },
};

/** A valid event for tenant `apiKeyId` (APIKeyID in the body sometimes, always the tenant's). */
export function validEvent(apiKeyId: string): fc.Arbitrary<Obj> {
  return fc
    .constantFrom(...EVENT_TYPES)
    .chain((event) => {
      const campaign = event === 'campaign';
      return fc.record({
        event: fc.constant(event),
        time: fc.integer({ min: 0, max: MAX_UNIX_SECONDS }),
        MessageID: campaign ? optional(idSpelling(uint64)) : idSpelling(uint64),
        email: campaign ? optional(fc.emailAddress()) : fc.emailAddress().filter((s) => s.length <= 320),
        APIKeyID: optional(fc.constantFrom<Json>(apiKeyId, Number(apiKeyId))),
        ...COMMON_FIELDS,
        ...(campaign ? { mj_campaign_id: idSpelling(fc.bigInt({ min: 1n, max: INT64_MAX })) } : {}),
        ...TYPE_FIELDS[event],
        extras: fc.dictionary(extraKey, extraValue, { maxKeys: 3 }),
      });
    })
    .map(({ extras, ...fields }) => {
      const id = nextUid();
      const e = defined({ ...extras, ...fields, fz: id });
      // An explicit EventID must be unique too.
      if (typeof e['EventID'] === 'string') e['EventID'] = `${e['EventID']}.${id}`;
      return e;
    });
}

const notObjects: fc.Arbitrary<Json> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  ascii(10),
  fc.array(fc.integer(), { maxLength: 3 }),
);

const badTime: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>('1700000000', '', null, true, [], {}, -1, 1.5, MAX_UNIX_SECONDS + 1, 1e300, -0.5),
  fc.integer({ max: -1 }),
  fc.double({ min: 0.01, max: 1e9, noNaN: true }).filter((d) => !Number.isInteger(d)),
);
const badMessageId: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(-1, '-1', 1.5, '1.5', '1e3', 'abc', '', true, null, [], {}, UINT64_MAX + 1n, (UINT64_MAX + 1n).toString(), '9'.repeat(21), '0x10'),
  fc.bigInt({ min: -(2n ** 70n), max: -1n }),
  fc.bigInt({ min: UINT64_MAX + 1n, max: 2n ** 80n }),
  fc.double({ min: 0.01, max: 1e6, noNaN: true }).filter((d) => !Number.isInteger(d)),
);
const badRefId: fc.Arbitrary<Json> = fc.constantFrom<Json>(-1, '-3', 1.25, 'seven', true, [], {}, INT64_MAX + 1n, (INT64_MAX + 1n).toString());
const badEmail: fc.Arbitrary<Json> = fc.constantFrom<Json>('', 'no-at-sign', 'two@@example.com', 'a b@example.com', '@', 'x@', 5, null, true, ['a@b.c'], { email: 'a@b.c' }, `${'a'.repeat(320)}@b.c`);
const badString: fc.Arbitrary<Json> = fc.constantFrom<Json>(5, true, [], {}, 1.5);

/** One lone UTF-16 surrogate inside a string: valid JSON text, but Postgres cannot store it. */
const loneSurrogate = fc.constantFrom('\ud800', '\udfff', 'a\udbffb');

const COMMON_STRING_LIMITS: [string, number][] = [['sender', 320], ['Message_GUID', 128], ['customcampaign', 255], ['CustomID', 255], ['Payload', 65_536]];

function mutations(e: Obj, ownKey: string, otherKey: string): fc.Arbitrary<Mutation> {
  const event = String(e['event']);
  const campaign = event === 'campaign';
  const set = (k: string, v: Json): Mutation['apply'] => (o) => ({ ...o, [k]: v });
  const drop = (k: string): Mutation['apply'] => (o) => Object.fromEntries(Object.entries(o).filter(([key]) => key !== k));
  const list: fc.Arbitrary<Mutation>[] = [
    notObjects.map((v) => ({ why: 'not an object', apply: () => v })),
    fc.constantFrom('event', 'time').map((k) => ({ why: `missing ${k}`, apply: drop(k) })),
    fc.oneof(fc.constantFrom<Json>('delivered', 'OPEN', 'Sent', '', 'campaigns', null, 3, true), ascii(8).filter((s) => !(EVENT_TYPES as readonly string[]).includes(s))).map((v) => ({ why: 'unknown event type', apply: set('event', v) })),
    badTime.map((v) => ({ why: 'bad time', apply: set('time', v) })),
    fc.tuple(fc.constantFrom('mj_campaign_id', 'mj_contact_id', 'mj_list_id', 'mj_sender_id'), badRefId).map(([k, v]) => ({ why: `bad ${k}`, apply: set(k, v) })),
    fc.tuple(fc.constantFrom('sender', 'Message_GUID', 'customcampaign', 'CustomID', 'Payload', 'EventID'), badString).map(([k, v]) => ({ why: `${k} of the wrong type`, apply: set(k, v) })),
    fc.constantFrom(...COMMON_STRING_LIMITS).map(([k, max]) => ({ why: `oversized ${k}`, apply: set(k, 'x'.repeat(max + 1)) })),
    fc.constantFrom<Json>('', 'e'.repeat(129)).map((v) => ({ why: 'bad EventID', apply: set('EventID', v) })),
    fc.constantFrom<Json>(otherKey, Number(otherKey), '999999999', 0, -1, 'me').map((v) => ({ why: 'APIKeyID not the sender', apply: set('APIKeyID', v) })),
    fc.constantFrom('CustomID', 'x_nul').map((k) => ({ why: 'NUL character', apply: set(k, `a\u0000b`) })),
    fc.tuple(fc.constantFrom('CustomID', 'x_text'), loneSurrogate).map(([k, v]) => ({ why: 'lone surrogate', apply: set(k, v) })),
    loneSurrogate.map((s) => ({ why: 'lone surrogate in a key', apply: (o: Obj) => ({ ...o, [`x${s}`]: 1 }) })),
  ];
  if (ownKey === otherKey) throw new Error('the other tenant must differ');
  if (!campaign) {
    list.push(
      fc.constantFrom('MessageID', 'email').map((k) => ({ why: `missing ${k}`, apply: drop(k) })),
      badMessageId.map((v) => ({ why: 'bad MessageID', apply: set('MessageID', v) })),
      badEmail.map((v) => ({ why: 'bad email', apply: set('email', v) })),
    );
  } else {
    list.push(
      fc.constantFrom<Json>(0, '0', null).map((v) => ({ why: 'campaign without a campaign id', apply: v === null ? drop('mj_campaign_id') : set('mj_campaign_id', v) })),
      fc.constantFrom<[string, Json]>(['Status', 9], ['Status', 'live'], ['IDType', 'Newsletter'], ['Starred', 'yes'], ['SendTimeStart', -5], ['Title', 'T'.repeat(1025)]).map(([k, v]) => ({ why: `bad campaign ${k}`, apply: set(k, v) })),
    );
  }
  if (event === 'click') list.push(fc.constantFrom<Json>(undefined as unknown as Json, 7, null, 'u'.repeat(8193)).map((v) => ({ why: 'bad url', apply: v === undefined ? drop('url') : set('url', v) })));
  if (event === 'bounce') list.push(fc.tuple(fc.constantFrom('blocked', 'hard_bounce'), fc.constantFrom<Json>('true', 1, 0, 'no', null)).map(([k, v]) => ({ why: `${k} not a boolean`, apply: set(k, v) })));
  if (event === 'open' || event === 'click' || event === 'unsub') list.push(fc.constantFrom<[string, Json]>(['geo', 'ABCDEFGHI'], ['ip', 7], ['agent', 'a'.repeat(2049)]).map(([k, v]) => ({ why: `bad ${k}`, apply: set(k, v) })));
  return fc.oneof(...list);
}

/** A malformed event: a valid one with one mutation the contract refuses. */
export function malformedEvent(ownKey: string, otherKey: string): fc.Arbitrary<ValueCase> {
  return validEvent(ownKey).chain((e) =>
    mutations(e, ownKey, otherKey).map((m): ValueCase => {
      const value = m.apply(e);
      return { valid: false, why: m.why, value, event: String(e['event']) };
    }),
  );
}

/** Valid and malformed events mixed, about `validShare` of them valid. */
export function eventCase(ownKey: string, otherKey: string, validShare = 0.6): fc.Arbitrary<ValueCase> {
  const weight = Math.round(validShare * 10);
  return fc.oneof(
    { weight, arbitrary: validEvent(ownKey).map((e): ValueCase => ({ valid: true, why: 'valid', value: e, event: String(e['event']) })) },
    { weight: 10 - weight, arbitrary: malformedEvent(ownKey, otherKey) },
  );
}

/** JSON text of a value, 64-bit integers written bare. */
export const jsonText = (value: Json): string => stringifyExactJson(value);

/** Bytes that are not a valid event whatever the subject: garbage, bad UTF-8, cut or empty JSON. */
export function malformedBytes(apiKeyId: string): fc.Arbitrary<{ why: string; bytes: Uint8Array; event: string }> {
  const enc = new TextEncoder();
  const badSequences = [[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80]];
  return fc.oneof(
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => ({ why: 'garbage bytes', bytes, event: 'open' })),
    fc.constantFrom('', ' ', '{', '}', '{"event":"open",', 'null', '[]', '""', '{}', 'NaN', '{"event":"open"}}', "{'event':'open'}").map((s) => ({ why: `not an event: ${JSON.stringify(s)}`, bytes: enc.encode(s), event: 'open' })),
    fc.tuple(validEvent(apiKeyId), fc.constantFrom(...badSequences), fc.nat()).map(([e, seq, at]) => {
      // Invalid UTF-8 inside the value of a string field.
      const body = enc.encode(jsonText({ ...e, x_bytes: 'ab' }));
      const marker = enc.encode('"x_bytes":"a');
      const start = indexOf(body, marker) + marker.length;
      const out = new Uint8Array(body.length + seq.length);
      out.set(body.subarray(0, start));
      out.set(seq, start);
      out.set(body.subarray(start), start + seq.length);
      void at;
      return { why: `bad UTF-8 ${seq.map((b) => b.toString(16)).join(' ')}`, bytes: out, event: String(e['event']) };
    }),
    fc.tuple(validEvent(apiKeyId), fc.nat()).map(([e, n]) => {
      const t = jsonText(e);
      return { why: 'truncated JSON', bytes: enc.encode(t.slice(0, n % (t.length - 1))), event: String(e['event']) };
    }),
  );
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  throw new Error('marker not found');
}
