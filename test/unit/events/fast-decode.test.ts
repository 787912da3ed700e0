import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeEventText, decodeEventTextStrictly, decodeEventValue, decodeEventValueStrictly } from '../../../src/events/decode.js';
import { parseExactJson } from '../../../src/events/exact-json.js';
import { fastDecodeText } from '../../../src/events/fast-decode.js';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../../support/events.js';

/**
 * The fast path (fast-decode.ts) against the zod schema: whatever it accepts, zod accepts as the
 * same row; whatever zod rejects, it leaves to zod; so decodeEventText answers exactly as the
 * schema alone would (same rows, same reasons). Events are generated valid, then some are broken.
 */

const TENANT = '42';
type Fields = [string, unknown][];

const digits = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
const u64 = fc.oneof(
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 64n - 1n }), // written bare, above 2^53
  fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  digits(0n, 2n ** 64n - 1n),
);
const refId = fc.oneof(fc.integer({ min: 0, max: 2 ** 40 }), digits(0n, 2n ** 63n - 1n), fc.constant(null));
const str = (max: number) => fc.string({ maxLength: Math.min(max, 40) });
const email = fc.oneof(fc.constant('api@mailjet.com'), fc.constant(' Someone@GMail.com '), fc.emailAddress());
const agent = fc.oneof(fc.constantFrom(String(sampleEvents()[3]?.['agent']), 'List-Unsubscribe', 'YahooMailProxy; x'), str(100));

const TYPE_FIELDS: Record<string, [string, fc.Arbitrary<unknown>][]> = {
  sent: [['mj_message_id', str(32)], ['smtp_reply', str(2048)]],
  open: [['ip', str(64)], ['geo', fc.constantFrom('US', 'fr', '', 'XXXXXXXX')], ['agent', agent]],
  click: [['ip', str(64)], ['geo', fc.constantFrom('US', 'fr', '')], ['agent', agent]],
  bounce: [['blocked', fc.boolean()], ['hard_bounce', fc.boolean()], ['error_related_to', str(64)], ['error', fc.constantFrom('user unknown', 'quota exceeded', 'x')], ['comment', str(8192)]],
  blocked: [['error_related_to', str(64)], ['error', fc.constantFrom('user unknown', 'preblocked', 'x')]],
  spam: [['source', str(255)]],
  unsub: [['ip', str(64)], ['geo', fc.constantFrom('US', '')], ['agent', agent]],
  queued: [],
  deferred: [['error_related_to', str(64)], ['error', fc.constantFrom('greylisted', 'x')], ['smtp_reply', str(2048)]],
};
const COMMON: [string, fc.Arbitrary<unknown>][] = [
  ['EventID', fc.string({ minLength: 1, maxLength: 128 })],
  ['APIKeyID', fc.constantFrom(42, '42')],
  ['mj_campaign_id', refId],
  ['mj_contact_id', refId],
  ['mj_list_id', refId],
  ['mj_sender_id', refId],
  ['sender', fc.oneof(fc.constant(''), fc.constant('news@shop.example'), str(320))],
  ['Message_GUID', str(128)],
  ['customcampaign', str(255)],
  ['CustomID', str(255)],
  ['Payload', str(200)],
  ['x_extra', fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => Number.isSafeInteger(x) || !Number.isInteger(x)))],
];

/** A valid event of a common shape: required fields, then any subset of the optional ones. */
const validEvent: fc.Arbitrary<Fields> = fc.constantFrom(...Object.keys(TYPE_FIELDS)).chain((type) => {
  const optional = [...COMMON, ...(TYPE_FIELDS[type] ?? [])];
  const required: [string, fc.Arbitrary<unknown>][] = [
    ['event', fc.constant(type)],
    ['time', fc.integer({ min: 0, max: 253_402_300_799 })],
    ['MessageID', u64],
    ['email', email],
    ...(type === 'click' ? ([['url', fc.webUrl({ withQueryParameters: true })]] as [string, fc.Arbitrary<unknown>][]) : []),
  ];
  return fc
    .tuple(
      fc.tuple(...required.map(([k, a]) => a.map((v): [string, unknown] => [k, v]))),
      fc.subarray(optional).chain((fields) => fc.tuple(...fields.map(([k, a]) => a.map((v): [string, unknown] => [k, v])))),
    )
    .chain(([req, opt]) => fc.shuffledSubarray([...req, ...opt], { minLength: req.length + opt.length }));
});

/** Values that break the contract or leave the fast path's comfort zone. */
const oddValue = fc.oneof(
  fc.constant(null),
  fc.constant(-1),
  fc.constant(1.5),
  fc.constant(''),
  fc.constant(' 7 '),
  fc.constant('007'),
  fc.constant('18446744073709551616'),
  fc.constant(2n ** 64n),
  fc.constant(2n ** 60n),
  fc.constant(true),
  fc.constant({ nested: 1 }),
  fc.constant([1]),
  fc.constant('x'.repeat(9000)),
  fc.constant('a\u0000b'),
  fc.constant('nobody'),
  fc.constant('campaign'),
  fc.constant('delivered'),
  fc.constant(253_402_300_800),
);
const FIELDS = ['event', 'time', 'MessageID', 'email', 'url', 'EventID', 'APIKeyID', 'mj_campaign_id', 'mj_contact_id', 'geo', 'agent', 'blocked', 'error', 'sender', 'Payload', 'x_extra'];

/** A valid event with one field removed, replaced or duplicated. */
const brokenEvent: fc.Arbitrary<Fields> = fc
  .tuple(validEvent, fc.constantFrom(...FIELDS), oddValue, fc.constantFrom('replace', 'remove', 'duplicate'))
  .map(([fields, field, value, how]) => {
    if (how === 'remove') return fields.filter(([k]) => k !== field);
    if (how === 'duplicate') return [...fields, [field, value] as [string, unknown]];
    return fields.some(([k]) => k === field) ? fields.map(([k, v]): [string, unknown] => [k, k === field ? value : v]) : [...fields, [field, value]];
  });

/** JSON text as producers write it: bigints as bare integers, sometimes with spaces. */
function toText(fields: Fields, spaced: boolean): string {
  const sep = spaced ? ' : ' : ':';
  const value = (v: unknown): string => (typeof v === 'bigint' ? v.toString() : JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x)));
  return `{${fields.map(([k, v]) => `${JSON.stringify(k)}${sep}${value(v)}`).join(spaced ? ', ' : ',')}}`;
}

const context = fc.record({ subject: fc.constantFrom<string | undefined>(undefined, 'open', 'sent', 'click'), seq: fc.nat() });

function checkAgreement(text: string, ctx: { apiKeyId: string; subjectEvent?: string; natsSeq: number }): void {
  const strict = decodeEventTextStrictly(text, ctx);
  const fast = fastDecodeText(text, ctx);
  if (fast !== null) expect(strict).toEqual({ ok: true, row: fast });
  expect(decodeEventText(text, ctx)).toEqual(strict);
  // The HTTP path: a parsed value (64-bit ids as bigints), the payload written anew.
  let value: unknown;
  try {
    value = parseExactJson(text);
  } catch {
    return;
  }
  expect(decodeEventValue(value, ctx)).toEqual(decodeEventValueStrictly(value, ctx));
}

const ctxOf = (c: { subject: string | undefined; seq: number }) => ({ apiKeyId: TENANT, natsSeq: c.seq, ...(c.subject !== undefined ? { subjectEvent: c.subject } : {}) });

describe('fast decode path', () => {
  it('accepts every valid event of the common shapes, as the same row as the schema', () => {
    fc.assert(
      fc.property(validEvent, fc.boolean(), fc.nat(), (fields, spaced, seq) => {
        const type = String(fields.find(([k]) => k === 'event')?.[1]);
        const ctx = { apiKeyId: TENANT, subjectEvent: type, natsSeq: seq };
        const text = toText(fields, spaced);
        const strict = decodeEventTextStrictly(text, ctx);
        expect(strict.ok ? '' : strict.reason).toBe('');
        expect(fastDecodeText(text, ctx)).toEqual(strict.ok ? strict.row : null);
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees with the schema on valid and broken events: accepted or not, row and reason', () => {
    fc.assert(
      fc.property(fc.oneof(validEvent, brokenEvent), fc.boolean(), context, (fields, spaced, c) => checkAgreement(toText(fields, spaced), ctxOf(c))),
      { numRuns: 5000 },
    );
  });

  it('leaves texts it cannot be sure of to the schema', () => {
    const ctx = { apiKeyId: TENANT };
    const sent = `"event":"sent","time":1,"email":"a@b.co"`;
    const unsure = [
      `{${sent},"MessageID":19421777835146490,"MessageID":19421777835146491}`, // the key twice: lossless-json decides
      `{${sent},"MessageID":1.9421777835146490e16}`, // not written as an integer
      `{${sent},"MessageID":${' '.repeat(70)}19421777835146490}`, // beyond parseExactJson's look-ahead
      `{${sent},"x":{"MessageID":19421777835146491},"MessageID":19421777835146490}`, // nested 64-bit number
      `{${sent},"Message\\u0049D":19421777835146490}`, // the key spelled with an escape
      `{${sent},"MessageID":"0019421777835146490"}`, // leading zeros
      withBareMessageId(sampleEvents().at(-1) ?? {}), // a campaign event
    ];
    for (const text of unsure) {
      expect(fastDecodeText(text, ctx)).toBeNull();
      checkAgreement(text, { ...ctx, natsSeq: 1 });
    }
  });

  it('takes the sample event of every common type', () => {
    for (const event of sampleEvents().filter((e) => e['event'] !== 'campaign')) {
      const row = fastDecodeText(withBareMessageId(event), { apiKeyId: TENANT });
      expect(row?.message_id).toBe(BIG_MESSAGE_ID);
    }
  });
});
