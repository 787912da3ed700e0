import { describe, expect, it } from 'vitest';
import { type LogEventRow, MAX_EVENT_BYTES, MAX_EVENT_DEPTH, MAX_EXPONENT_SUM, MAX_NUMBER_EXPONENT, decodeEventBytes, decodeEventText, decodeEventValue } from '../../../src/events/decode.js';
import { deriveEventId } from '../../../src/events/event-id.js';
import { parseExactJson } from '../../../src/events/exact-json.js';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../../support/events.js';

const ctx = { apiKeyId: '42' };

function accept(text: string): LogEventRow {
  const result = decodeEventText(text, ctx);
  if (!result.ok) throw new Error(`rejected: ${result.reason}`);
  return result.row;
}

function reject(value: unknown): string {
  const result = decodeEventText(typeof value === 'string' ? value : JSON.stringify(value), ctx);
  if (result.ok) throw new Error('accepted');
  return result.reason;
}

describe('decodeEvent: every event type in Mailjet payload shapes', () => {
  for (const event of sampleEvents()) {
    it(`accepts ${String(event['event'])}`, () => {
      const row = accept(withBareMessageId(event));
      expect(row.type).toBe(event['event']);
      expect(row.api_key_id).toBe('42');
      expect(row.event_time).toBe(event['time']);
      expect(row.campaign_id).toBe('7257');
      if (event['event'] !== 'campaign') expect(row.message_id).toBe(BIG_MESSAGE_ID);
    });
  }

  it('keeps a MessageID above 2^53 exact, as a bare number and as a string', () => {
    const bare = accept('{"event":"sent","time":1,"MessageID":19421777835146490,"email":"a@b.co"}');
    const text = accept('{"event":"sent","time":1,"MessageID":"19421777835146490","email":"a@b.co"}');
    expect(bare.message_id).toBe('19421777835146490');
    expect(text.message_id).toBe('19421777835146490');
    expect(accept('{"event":"sent","time":1,"MessageID":18446744073709551615,"email":"a@b.co"}').message_id).toBe('18446744073709551615');
    // the payload is the text as received, so the log's jsonb holds the same digits
    expect(bare.payload).toContain('19421777835146490');
  });

  it('enriches at ingest: domain, ESP, user agent, link, bounce state', () => {
    const [, , , open, click, bounce] = sampleEvents().map((e) => accept(withBareMessageId({ ...e, email: 'Someone@GMail.com' })));
    expect(open?.recipient_domain).toBe('gmail.com');
    expect(open?.esp).toBe('Gmail');
    expect(open?.ua_client).toBe('Apple Mail');
    expect(open?.ua_platform).toBe('macOS');
    expect(open?.geo).toBe('US');
    expect(click?.url).toBe('https://mailjet.com/');
    expect(bounce?.state_id).toBe(1);
    expect(bounce?.hard_bounce).toBe(true);
    expect(bounce?.blocked).toBe(false);
  });

  it('reads an empty agent as no agent, and a country code without its spaces', () => {
    const base = '"event":"open","time":1,"MessageID":1,"email":"a@b.co"';
    const none = accept(`{${base}}`);
    for (const agent of ['""', '"  "']) {
      const row = accept(`{${base},"agent":${agent},"geo":" fr "}`);
      expect([row.ua_platform, row.ua_client], agent).toEqual([none.ua_platform, none.ua_client]);
      expect(row.geo).toBe('FR');
    }
    expect(none.ua_platform).toBeNull();
    expect(accept(`{${base},"geo":"  "}`).geo).toBeNull();
  });

  it('treats 0 and absent campaign/contact/list/sender ids as none', () => {
    const row = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","mj_campaign_id":0}');
    expect([row.campaign_id, row.contact_id, row.list_id, row.sender_id]).toEqual(['0', '0', '0', '0']);
  });

  it('keeps unknown extra fields in the payload', () => {
    const row = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","x_custom":{"deep":[1,2]}}');
    expect(JSON.parse(row.payload)).toMatchObject({ x_custom: { deep: [1, 2] } });
  });
});

describe('decodeEvent: bad payloads are rejected with a precise reason', () => {
  const base = { event: 'open', time: 1_700_000_000, MessageID: 1, email: 'a@b.co' };
  const cases: [string, unknown, RegExp][] = [
    ['garbage bytes', '\u0001\u0002not json', /not valid JSON/],
    ['an array', [base], /must be a JSON object/],
    ['no event', { ...base, event: undefined }, /^event: is required/],
    ['unknown event', { ...base, event: 'delivered' }, /^event: must be one of sent, open/],
    ['no time', { ...base, time: undefined }, /^time: is required/],
    ['time as text', { ...base, time: 'yesterday' }, /^time: must be Unix seconds/],
    ['fractional time', { ...base, time: 1.5 }, /^time: must be Unix seconds/],
    ['no MessageID', { ...base, MessageID: undefined }, /^MessageID: is required/],
    ['negative MessageID', { ...base, MessageID: -1 }, /^MessageID: must be a 64-bit unsigned integer/],
    ['MessageID past 2^64', { ...base, MessageID: '18446744073709551616' }, /^MessageID: must be a 64-bit unsigned integer/],
    ['MessageID as a word', { ...base, MessageID: 'abc' }, /^MessageID: .*got "abc"/],
    ['no email', { ...base, email: undefined }, /^email: is required/],
    ['email without @', { ...base, email: 'nobody' }, /^email: must be an email address/],
    ['click without url', { ...base, event: 'click' }, /^url: is required/],
    ['bounce with a text boolean', { ...base, event: 'bounce', hard_bounce: 'yes' }, /^hard_bounce:/],
    ['campaign without id', { event: 'campaign', time: 1 }, /^mj_campaign_id: is required/],
    ['campaign id 0', { event: 'campaign', time: 1, mj_campaign_id: 0 }, /^mj_campaign_id: must not be 0/],
    ['EventID too long', { ...base, EventID: 'x'.repeat(129) }, /^EventID: is longer than 128/],
    ['NUL character', { ...base, agent: 'a\u0000b' }, /NUL character/],
    ['another tenant', { ...base, APIKeyID: 7 }, /^APIKeyID: 7 does not match the sender's API key 42/],
  ];
  for (const [name, value, reason] of cases) {
    it(`rejects ${name}`, () => {
      expect(reject(value)).toMatch(reason);
    });
  }

  it('refuses a 64-bit id written with a decimal point or exponent, whose digits a double has lost', () => {
    const text = (messageId: string, campaignId = '1') => `{"event":"sent","time":1433333949,"MessageID":${messageId},"email":"r@x.co","mj_campaign_id":${campaignId}}`;
    for (const spelling of ['19421777835146491.0', '1.9421777835146491e16', '9007199254740993.0']) {
      expect(reject(text(spelling))).toMatch(/^MessageID: must be a 64-bit unsigned integer written as plain digits/);
    }
    expect(reject(text('1', '9007199254740993.0'))).toMatch(/^mj_campaign_id: .*plain digits/);
    // Within 2^53 such a spelling is exact, and read as the integer it is.
    expect(accept(text('19421777.0')).message_id).toBe('19421777');
    // In an HTTP batch (one JSON array), the two ids are told apart, not merged into one.
    const batch = parseExactJson(`[${text('19421777835146491.0')},${text('19421777835146492')}]`) as unknown[];
    expect(batch.map((v) => decodeEventValue(v, ctx).ok)).toEqual([false, true]);
  });

  it('rejects bytes that are not UTF-8', () => {
    const result = decodeEventBytes(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), ctx);
    expect(result).toEqual({ ok: false, reason: 'body is not valid UTF-8' });
  });

  it('rejects an event whose type differs from its NATS subject', () => {
    const result = decodeEventText(JSON.stringify(base), { ...ctx, subjectEvent: 'click' });
    expect(result.ok ? '' : result.reason).toMatch(/does not match the subject's event "click"/);
  });
});

describe('MessageID past 2^53, read back from the text', () => {
  it('takes it from the top-level key only, not from a string or a nested key that looks like it', () => {
    const real = '9007199254740992';
    // The look-alike keys are repeated with an escape, so that JSON.parse keeps a small value
    // for them; the real key is spelled with an escape, so the needle finds only the look-alike.
    const texts = [
      // A key ending in "MessageID (an escaped quote before it).
      `{"event":"open","time":1,"email":"a@b.co","x\\"MessageID": 9007199254740993,"x\\"Message\\u0049D": 5,"Message\\u0049D": ${real}}`,
      // A nested object's key.
      `{"event":"open","time":1,"email":"a@b.co","y":{"MessageID": 9007199254740993,"Message\\u0049D": 5},"Message\\u0049D": ${real}}`,
    ];
    for (const text of texts) {
      expect(JSON.parse(text).MessageID, text).toBe(Number(real));
      // The exact parse that decides such a text refuses its repeated key, as the event's reject.
      expect(decodeEventText(text, ctx), text).toEqual({ ok: false, reason: expect.stringMatching(/not valid JSON \(Duplicate key/) });
      expect(() => parseExactJson(text), text).toThrow(/Duplicate key/);
    }
  });
});

describe('EventID', () => {
  it('uses the producer EventID when given', () => {
    expect(accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","EventID":"evt-1"}').event_id).toBe('evt-1');
  });

  it('derives the same id whatever the key order or id spelling', () => {
    const a = accept('{"event":"sent","time":1,"MessageID":19421777835146490,"email":"a@b.co","mj_campaign_id":5}');
    const b = accept('{"mj_campaign_id":"5","email":"a@b.co","MessageID":"19421777835146490","time":1,"event":"sent"}');
    expect(a.event_id).toBe(b.event_id);
    expect(a.event_id).toMatch(/^h:[A-Za-z0-9_-]{32}$/);
  });

  it('derives one id for spellings of the same ids and address, on every path', () => {
    const spellings = [
      '{"event":"open","time":1700006410,"MessageID":6001,"email":"q@ex.com","mj_campaign_id":600}',
      '{"event":"open","time":1700006410,"MessageID":"06001","email":"q@ex.com","mj_campaign_id":600}',
      '{"event":"open","time":1700006410,"MessageID":" 6001 ","email":" q@ex.com ","mj_campaign_id":"0600"}',
    ];
    const ids = new Set<string>();
    for (const text of spellings) {
      ids.add(accept(text).event_id);
      const bytes = decodeEventBytes(Buffer.from(text), ctx);
      if (!bytes.ok) throw new Error(bytes.reason);
      ids.add(bytes.row.event_id);
    }
    expect(ids.size).toBe(1);
    // What the log row keeps apart still derives apart; a field 0 and left out too (ids stored before stay as they were).
    const other = [
      '{"event":"open","time":1700006410,"MessageID":6001,"email":"q@ex.com","mj_campaign_id":600,"mj_list_id":0}',
      '{"event":"open","time":1700006410,"MessageID":6001,"email":"Q@ex.com","mj_campaign_id":600}',
      '{"event":"open","time":1700006410,"MessageID":6001,"email":"q@ex.com"}',
      '{"event":"open","time":1700006410,"MessageID":6001,"email":"q@ex.com","mj_campaign_id":600,"agent":""}',
    ].map((t) => accept(t).event_id);
    expect(new Set([...ids, ...other]).size).toBe(5);
    // mj_message_id is text to the log: its leading zeros make another id.
    const sent = (id: string) => accept(`{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","mj_message_id":${id}}`).event_id;
    expect(sent('"0123"')).not.toBe(sent('"123"'));
  });

  it('derives different ids for events that differ only in a field named __proto__, at any depth', () => {
    const a = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","__proto__":"A"}');
    const b = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","__proto__":"B"}');
    const c = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","x":{"__proto__":"A"}}');
    const d = accept('{"event":"sent","time":1,"MessageID":1,"email":"a@b.co","x":{"__proto__":"B"}}');
    expect(new Set([a.event_id, b.event_id, c.event_id, d.event_id]).size).toBe(4);
  });

  it('derives different ids for different events and different tenants', () => {
    const raw = parseExactJson('{"event":"open","time":1,"MessageID":1,"email":"a@b.co"}') as Record<string, unknown>;
    expect(deriveEventId('1', raw)).not.toBe(deriveEventId('2', raw));
    expect(deriveEventId('1', raw)).not.toBe(deriveEventId('1', { ...raw, time: 2 }));
    // the APIKeyID field itself does not change the id (the tenant is already in it)
    expect(deriveEventId('1', raw)).toBe(deriveEventId('1', { ...raw, APIKeyID: 1 }));
  });

  it('decodeEventValue writes bigints back as bare integers in the payload', () => {
    const value = parseExactJson('{"event":"sent","time":1,"MessageID":19421777835146490,"email":"a@b.co"}');
    const result = decodeEventValue(value, ctx);
    expect(result.ok && result.row.payload).toBe('{"event":"sent","time":1,"MessageID":19421777835146490,"email":"a@b.co"}');
  });
});

describe('event size', () => {
  const event = (padBytes: number, pad = 'x') => JSON.stringify({ event: 'sent', time: 1, MessageID: 5, email: 'a@b.co', pad: pad.repeat(padBytes) });
  const overhead = event(0).length;

  it('takes an event of exactly 1 MiB and refuses one byte more, on every path', () => {
    const fits = event(MAX_EVENT_BYTES - overhead);
    const over = event(MAX_EVENT_BYTES - overhead + 1);
    expect(fits.length).toBe(MAX_EVENT_BYTES);
    expect(decodeEventText(fits, ctx).ok).toBe(true);
    expect(decodeEventBytes(Buffer.from(fits), ctx).ok).toBe(true);
    const reason = `event is ${MAX_EVENT_BYTES + 1} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take`;
    expect(decodeEventText(over, ctx)).toEqual({ ok: false, reason });
    expect(decodeEventBytes(Buffer.from(over), ctx)).toEqual({ ok: false, reason });
    expect(decodeEventValue(JSON.parse(over), ctx, over)).toEqual({ ok: false, reason });
  });

  it('counts UTF-8 bytes, not characters', () => {
    // 'é' is two bytes: under 1 MiB of characters, over 1 MiB of bytes.
    const text = event(MAX_EVENT_BYTES / 2, 'é');
    expect(text.length).toBeLessThan(MAX_EVENT_BYTES);
    expect(decodeEventText(text, ctx)).toMatchObject({ ok: false, reason: expect.stringMatching(/^event is \d+ bytes, over/) });
  });
});

describe('what the log could not read back', () => {
  const withExtra = (extra: string) => `{"event":"open","time":1700000000,"MessageID":7,"email":"a@b.co","x":${extra}}`;
  const exponentReason = `event holds a number with an exponent beyond ±${MAX_NUMBER_EXPONENT}, which the log would store written out in full`;
  const depthReason = `event nests arrays or objects deeper than ${MAX_EVENT_DEPTH} levels`;

  it('refuses a number whose exponent jsonb would write out as thousands of digits, on every path', () => {
    // 4 bytes sent, 131,001 characters every time the log is read: a few thousand made a whole log unreadable.
    const numbers = ['1e131000', `1E${MAX_NUMBER_EXPONENT + 1}`, `2.5e-${MAX_NUMBER_EXPONENT + 1}`, `-7e+99999999999999999999`];
    // In an array (the exact path decides) and as a plain field (the fast path takes the event first).
    for (const text of numbers.flatMap((n) => [withExtra(`[1, ${n}]`), withExtra(n)])) {
      const number = text;
      expect(decodeEventText(text, ctx), number).toEqual({ ok: false, reason: exponentReason });
      expect(decodeEventBytes(Buffer.from(text), ctx), number).toEqual({ ok: false, reason: exponentReason });
      expect(decodeEventValue(parseExactJson(text), ctx, text), number).toEqual({ ok: false, reason: exponentReason });
    }
  });

  it('refuses numbers whose exponents add up past the limit, each within it (170,000 of 1e400 would read back as 68 MB)', () => {
    const sumReason = `event's numbers have exponents adding up to more than ${MAX_EXPONENT_SUM}, which the log would store written out in full`;
    const count = Math.floor(MAX_EXPONENT_SUM / MAX_NUMBER_EXPONENT);
    expect(decodeEventText(withExtra(`[${Array(count).fill(`1e${MAX_NUMBER_EXPONENT}`).join(',')}]`), ctx).ok).toBe(true);
    const inArray = withExtra(`[${Array(count + 1).fill(`1e${MAX_NUMBER_EXPONENT}`).join(',')}]`);
    const asFields = `{"event":"open","time":1700000000,"MessageID":7,"email":"a@b.co",${Array.from({ length: count + 1 }, (_, i) => `"n${i}":1e${MAX_NUMBER_EXPONENT}`).join(',')}}`;
    for (const text of [inArray, asFields]) {
      expect(decodeEventText(text, ctx)).toEqual({ ok: false, reason: sumReason });
      expect(decodeEventValue(parseExactJson(text), ctx, text)).toEqual({ ok: false, reason: sumReason });
    }
  });

  it('takes exponents a double can have, and letters that only look like one', () => {
    for (const extra of [`1e${MAX_NUMBER_EXPONENT}`, '5e-324', '1.7976931348623157e308', '[true, false, 1e5]', '"1e131000"', '{"e1e999999":"x\\"1e999999"}']) {
      expect(decodeEventText(withExtra(extra), ctx).ok, extra).toBe(true);
    }
  });

  it('refuses nesting deeper than the limit on every path, however deep, and without throwing', () => {
    const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    // The event object is the first level.
    expect(decodeEventText(withExtra(nested(MAX_EVENT_DEPTH - 1)), ctx).ok).toBe(true);
    for (const depth of [MAX_EVENT_DEPTH, 5000, 200_000]) {
      const text = withExtra(nested(depth));
      expect(decodeEventText(text, ctx)).toEqual({ ok: false, reason: depthReason });
      expect(decodeEventValue(JSON.parse(text), ctx, text)).toEqual({ ok: false, reason: depthReason });
      // A value with no text of its own: writing it out would overflow the stack.
      expect(decodeEventValue(JSON.parse(text), ctx)).toEqual({ ok: false, reason: depthReason });
    }
  });
});
