import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreatedApiKey, createApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { type TestEnv, countRows, createTestEnv, startHttpService } from '../../support/harness.js';
import { type Json, type ValueCase, eventCase, jsonText, validEvent } from './raw-event-arbitraries.js';
import { basicAuth as basic } from '../../support/api.js';

/**
 * POST /v1/events on a real listening server (api + ingest, real Postgres) with thousands of
 * fuzzed events in requests of random sizes: each answer lists exactly the malformed events,
 * by index, each with a reason; every valid event is stored once; every rejected event is a
 * dead letter (source http) with the same reason and the event as sent. Whole bodies that are
 * not a JSON array of events (garbage, bad UTF-8, cut JSON, too many events) are refused with a
 * 400 in the error envelope and store nothing. The server never answers a 5xx.
 */

const SEED = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31);
const EVENTS = 3000;
const BAD_BODIES = 300;

let t: TestEnv;
let other: CreatedApiKey;
let service: Service;
let base: string;


beforeAll(async () => {
  t = await createTestEnv({ API_RATE_LIMIT: '0' });
  other = await createApiKey(t.db.kysely);
  ({ service } = await startHttpService(t, ['api', 'ingest']));
  base = service.url as string;
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

async function post(body: string | Uint8Array, contentType = 'application/json'): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/v1/events`, { method: 'POST', headers: { authorization: basic(t.key), 'content-type': contentType }, body });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
}

interface Summary {
  Accepted: number;
  Duplicates: number;
  Rejected: number;
  Errors: { Index: number; Reason: string }[];
}

const enc = new TextEncoder();

describe('POST /v1/events under fuzzed input', () => {
  it(`stores every valid event once and dead-letters every rejected one with its reason (seed ${SEED})`, async () => {
    const cases = fc.sample(eventCase(t.key.APIKeyID, other.APIKeyID), { numRuns: EVENTS, seed: SEED });
    const sizes = fc.sample(fc.integer({ min: 1, max: 150 }), { numRuns: EVENTS, seed: SEED + 1 });
    let accepted = 0;
    let rejected = 0;
    let requests = 0;
    const sentRejects: { value: Json; reason: string }[] = [];
    for (let at = 0, n = 0; at < cases.length; at += sizes[n++] as number) {
      const chunk: ValueCase[] = cases.slice(at, at + (sizes[n] as number));
      // A few events are sent twice in the same request: the copy is a duplicate, not a second row.
      const copy = chunk.find((c) => c.valid);
      const withCopy = copy !== undefined && n % 4 === 0 ? [...chunk, { ...copy }] : chunk;
      const res = await post(`[${withCopy.map((c) => jsonText(c.value)).join(',')}]`);
      requests++;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const s = res.body as unknown as Summary;
      const bad = withCopy.flatMap((c, i) => (c.valid ? [] : [i]));
      expect(s.Errors.map((e) => e.Index), `seed ${SEED}: ${bad.map((i) => withCopy[i]?.why).join(', ')}`).toEqual(bad);
      for (const e of s.Errors) {
        expect(e.Reason.trim()).not.toBe('');
        sentRejects.push({ value: (withCopy[e.Index] as ValueCase).value, reason: e.Reason });
      }
      const good = chunk.filter((c) => c.valid).length;
      expect(s).toMatchObject({ Accepted: good, Duplicates: withCopy.length - chunk.length, Rejected: bad.length });
      accepted += s.Accepted;
      rejected += s.Rejected;
    }
    expect(requests).toBeGreaterThan(30);
    expect(rejected).toBeGreaterThan(800);
    expect(accepted).toBe(cases.filter((c) => c.valid).length);

    // Each valid event once; each rejected one a dead letter with the reason given in the answer.
    expect(await countRows(t.db, 'events')).toBe(accepted);
    const letters = await t.db.kysely.selectFrom('dead_letters').select(['source', 'reason', 'raw', 'api_key_id']).orderBy('id').execute();
    // Rows the database refused are dead-lettered after the decoder's rejects of their request;
    // the same reject sent again (the same text, the same reason) is stored once.
    const pair = (reason: string, raw: string) => `${reason}\n${raw}`;
    const distinct = [...new Set(sentRejects.map((r) => pair(r.reason, jsonText(r.value))))];
    expect(sentRejects).toHaveLength(rejected);
    expect(letters.map((l) => pair(l.reason, l.raw.toString('utf8'))).sort()).toEqual(distinct.sort());
    for (const l of letters) expect(l).toMatchObject({ source: 'http', api_key_id: BigInt(t.key.APIKeyID) });

    // The same requests again: nothing new is stored, every valid event is a duplicate.
    const again = cases.filter((c) => c.valid).slice(0, 500);
    const res = await post(`[${again.map((c) => jsonText(c.value)).join(',')}]`);
    expect(res.body).toMatchObject({ Accepted: 0, Duplicates: again.length, Rejected: 0 });
    expect(await countRows(t.db, 'events')).toBe(accepted);
  });

  it(`refuses bodies that are not a JSON array of events with a 400 envelope, storing nothing (seed ${SEED})`, async () => {
    const events = await countRows(t.db, 'events');
    const letters = await countRows(t.db, 'dead_letters');
    const valid = (n: number) => fc.sample(validEvent(t.key.APIKeyID), { numRuns: n, seed: SEED + 2 }).map(jsonText);
    const oneValid = valid(1)[0] as string;
    // Invalid bytes inside a free-text field: decoded leniently, they would become U+FFFD and pass.
    const badUtf8 = (s: string) => {
      const withField = s.replace(/^\[\{/, '[{"x_bytes":"a",');
      const b = enc.encode(withField);
      const at = withField.indexOf('"x_bytes":"a') + 12;
      return new Uint8Array([...b.subarray(0, at), 0xff, 0xfe, ...b.subarray(at)]);
    };
    const body = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b): [string, Uint8Array | string] => ['garbage bytes', b]),
      fc.constantFrom('{', '[', '[{]', '[1,]', '{"event":"open"}', '"events"', '42', 'null', 'true', '{}', `[${oneValid}`, `${oneValid}]`).map((s): [string, Uint8Array | string] => [`not an array: ${s.slice(0, 20)}`, s]),
      fc.nat().map((n): [string, Uint8Array | string] => {
        const full = `[${oneValid},${oneValid}]`;
        return ['cut JSON', full.slice(0, 1 + (n % (full.length - 2)))];
      }),
      fc.constant<[string, Uint8Array | string]>(['bad UTF-8 inside an event', badUtf8(`[${oneValid}]`)]),
      fc.constant<[string, Uint8Array | string]>(['1001 events', `[${Array.from({ length: 1001 }, () => oneValid).join(',')}]`]),
    );
    const bodies = fc.sample(body, { numRuns: BAD_BODIES, seed: SEED + 3 });
    for (const [why, b] of bodies) {
      const res = await post(b);
      expect(res.status, `${why} (seed ${SEED})`).toBe(400);
      expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.stringMatching(/\S/), StatusCode: 400 });
    }
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonp', '']) {
      const res = await post(`[${oneValid}]`, type);
      expect(res.status, type).toBeGreaterThanOrEqual(400);
      expect(res.status, type).toBeLessThan(500);
      expect(res.body).toMatchObject({ ErrorInfo: '', StatusCode: res.status });
    }
    expect(await countRows(t.db, 'events')).toBe(events);
    expect(await countRows(t.db, 'dead_letters')).toBe(letters);
  });

  it('tells what jsonb cannot store from what only looks like it', async () => {
    const base = { event: 'open', time: 1_700_000_000, MessageID: 5, email: 'esc@example.com' };
    // Written as a producer that escapes everything but ASCII would (a surrogate pair), and a literal backslash.
    const body = `[${JSON.stringify({ ...base, EventID: 'pair', CustomID: 'x' }).replace('"x"', '"smile \\ud83d\\ude00"')},${JSON.stringify({ ...base, EventID: 'literal', CustomID: 'back\\u0000slash' })},${JSON.stringify({ ...base, EventID: 'lone', CustomID: 'a\ud800b' })},${JSON.stringify({ ...base, EventID: 'nul', CustomID: 'a\u0000b' })}]`;
    expect(body).toContain('\\ud83d\\ude00');
    const res = await post(body);
    expect(res.body).toEqual({
      Accepted: 2,
      Duplicates: 0,
      Rejected: 2,
      Errors: [
        { Index: 2, Reason: 'event contains a lone UTF-16 surrogate (\\ud800), which cannot be stored' },
        { Index: 3, Reason: 'event contains a NUL character (\\u0000), which cannot be stored' },
      ],
    });
    const rows = await t.db.kysely.selectFrom('events').select(['event_id', 'payload']).where('event_id', 'in', ['pair', 'literal']).orderBy('event_id').execute();
    expect(rows.map((r) => [r.event_id, (r.payload as { CustomID: string }).CustomID])).toEqual([
      ['literal', 'back\\u0000slash'],
      ['pair', 'smile \ud83d\ude00'],
    ]);
  });
});
