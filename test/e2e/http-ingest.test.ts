import net from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { MAX_EVENT_BYTES } from '../../src/events/decode.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { type Service, startService } from '../../src/main.js';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../support/events.js';
import { type TestEnv, countRows, createTestEnv, quietLogger } from '../support/harness.js';

/** POST /v1/events and GET /status against a real listening server (api + ingest, no NATS). */

let t: TestEnv;
let service: Service;
let base: string;
let auth: string;

const basic = (user: string, secret: string) => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

async function post(body: string, authorization: string | null = auth, contentType = 'application/json') {
  const headers: Record<string, string> = { 'content-type': contentType };
  if (authorization !== null) headers['authorization'] = authorization;
  const res = await fetch(`${base}/v1/events`, { method: 'POST', headers, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as unknown };
}

const envelope = (status: number, message: string | RegExp) => ({
  ErrorInfo: '',
  ErrorMessage: typeof message === 'string' ? message : expect.stringMatching(message),
  StatusCode: status,
});

beforeAll(async () => {
  t = await createTestEnv();
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  const config = loadConfig(withoutNats);
  expect(config.nats).toBeNull();
  service = await startService(config, ['api', 'ingest'], quietLogger());
  base = service.url as string;
  auth = basic(t.key.ApiKey, t.key.SecretKey);
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

/** The sample events, with explicit EventIDs on all but `open` and `campaign` (derived ids). */
const batch = sampleEvents().map((e) => (e.event === 'open' || e.event === 'campaign' ? e : { ...e, EventID: `http-${String(e.event)}` }));
const batchText = `[${batch.map(withBareMessageId).join(',')}]`;

describe('POST /v1/events', () => {
  it('stores a valid batch with exact values, 64-bit MessageID included', async () => {
    expect(batchText).toContain(`"MessageID":${BIG_MESSAGE_ID},`);
    const res = await post(batchText);
    expect(res).toMatchObject({ status: 200, body: { Accepted: 10, Duplicates: 0, Rejected: 0, Errors: [] } });

    const rows = await t.db.kysely.selectFrom('events').selectAll().orderBy('position').execute();
    expect(rows.map((r) => r.type)).toEqual(batch.map((e) => e.event));
    expect(new Set(rows.map((r) => r.api_key_id))).toEqual(new Set([BigInt(t.key.APIKeyID)]));

    const sent = rows.find((r) => r.type === 'sent');
    expect(sent).toMatchObject({
      event_id: 'http-sent',
      event_time: 1_433_333_949n,
      message_id: BIG_MESSAGE_ID,
      email: 'api@mailjet.com',
      recipient_domain: 'mailjet.com',
      campaign_id: 7257n,
      contact_id: 4n,
      custom_campaign: null,
    });
    expect(rows.find((r) => r.type === 'bounce')).toMatchObject({ hard_bounce: true, blocked: false, error: 'user unknown', error_related_to: 'recipient' });
    expect(rows.find((r) => r.type === 'open')).toMatchObject({ geo: 'US', event_id: expect.stringMatching(/^h:/) });
    expect(rows.find((r) => r.type === 'campaign')).toMatchObject({ message_id: null, email: null, campaign_id: 7257n });

    const exact = await sql<{ event_id: string; message_id: string | null; from_payload: string | null; kind: string | null }>`
      SELECT event_id, message_id::text AS message_id, payload->>'MessageID' AS from_payload,
             jsonb_typeof(payload->'MessageID') AS kind
      FROM events WHERE type <> 'campaign'`.execute(t.db.kysely);
    expect(exact.rows).toHaveLength(9);
    for (const r of exact.rows) expect(r).toMatchObject({ message_id: BIG_MESSAGE_ID, from_payload: BIG_MESSAGE_ID, kind: 'number' });

    // The payload is the event as sent, nothing added or lost.
    for (const e of batch) {
      const same = await sql<{ n: bigint }>`SELECT count(*) AS n FROM events WHERE payload = ${withBareMessageId(e)}::jsonb`.execute(t.db.kysely);
      expect(same.rows[0]?.n, String(e.event)).toBe(1n);
    }
  });

  it('answers all Duplicates for the same batch again, and stores nothing', async () => {
    const before = await countRows(t.db, 'events');
    const res = await post(batchText);
    expect(res).toMatchObject({ status: 200, body: { Accepted: 0, Duplicates: 10, Rejected: 0, Errors: [] } });
    expect(await countRows(t.db, 'events')).toBe(before);
  });

  it('counts a repeated event inside one request once', async () => {
    const e = { event: 'open', time: 1_500_000_000, MessageID: '42', email: 'twice@example.com' };
    const res = await post(JSON.stringify([e, { ...e }]));
    expect(res.body).toEqual({ Accepted: 1, Duplicates: 1, Rejected: 0, Errors: [] });
  });

  it('treats the same event without EventID as a duplicate, whether MessageID is a number or a string', async () => {
    const asString = { event: 'click', time: 1_500_000_100, MessageID: BIG_MESSAGE_ID, email: 'c@example.com', url: 'https://example.com/a' };
    const first = await post(JSON.stringify([asString]), auth, 'application/json; charset=utf-8');
    expect(first).toMatchObject({ status: 200, body: { Accepted: 1, Duplicates: 0, Rejected: 0 } });
    const asNumber = `[{"url":"https://example.com/a","email":"c@example.com","MessageID":${BIG_MESSAGE_ID},"time":1500000100,"event":"click"}]`;
    expect((await post(asNumber)).body).toMatchObject({ Accepted: 0, Duplicates: 1, Rejected: 0 });
    expect((await post('[]')).body).toEqual({ Accepted: 0, Duplicates: 0, Rejected: 0, Errors: [] });
  });

  it('rejects a MessageID beyond 64 bits, naming the field', async () => {
    const res = await post('[{"event":"open","time":1500000000,"MessageID":18446744073709551616,"email":"a@example.com"}]');
    expect(res.body).toMatchObject({ Accepted: 0, Rejected: 1, Errors: [{ Index: 0, Reason: expect.stringMatching(/^MessageID: must be a 64-bit unsigned integer/) }] });
  });

  it('rejects invalid events of a mixed batch with their index and reason, and dead-letters them', async () => {
    const other = String(BigInt(t.key.APIKeyID) + 1000n);
    const ok = (n: number) => ({ event: 'sent', time: 1_500_000_000 + n, MessageID: String(n), email: `m${n}@example.com`, EventID: `mixed-${n}` });
    const mixed: unknown[] = [
      ok(1),
      { event: 'open', time: 1_500_000_000, email: 'a@example.com' },
      { event: 'sent', time: 'yesterday', MessageID: 3, email: 'a@example.com' },
      { event: 'delivered', time: 1_500_000_000, MessageID: 4, email: 'a@example.com' },
      ok(5),
      { ...ok(6), APIKeyID: Number(other) },
      'not an event',
      { ...ok(7), APIKeyID: Number(t.key.APIKeyID) },
    ];
    const lettersBefore = await countRows(t.db, 'dead_letters');
    const res = await post(JSON.stringify(mixed));
    const errors = [
      { Index: 1, Reason: 'MessageID: is required' },
      { Index: 2, Reason: 'time: must be Unix seconds (an integer)' },
      { Index: 3, Reason: expect.stringMatching(/^event: must be one of sent, open, click, bounce, blocked, spam, unsub, queued, deferred, campaign$/) },
      { Index: 5, Reason: `APIKeyID: ${other} does not match the sender's API key ${t.key.APIKeyID}` },
      { Index: 6, Reason: 'event must be a JSON object' },
    ];
    expect(res).toMatchObject({ status: 200, body: { Accepted: 3, Duplicates: 0, Rejected: 5, Errors: errors } });

    const stored = await t.db.kysely.selectFrom('events').select('event_id').where('event_id', 'like', 'mixed-%').orderBy('event_id').execute();
    expect(stored.map((r) => r.event_id)).toEqual(['mixed-1', 'mixed-5', 'mixed-7']);

    const letters = await t.db.kysely.selectFrom('dead_letters').selectAll().where('id', '>', BigInt(lettersBefore)).orderBy('id').execute();
    expect(letters).toHaveLength(5);
    const body = res.body as { Errors: { Index: number; Reason: string }[] };
    for (const [i, letter] of letters.entries()) {
      const error = body.Errors[i] as { Index: number; Reason: string };
      expect(letter).toMatchObject({ source: 'http', api_key_id: BigInt(t.key.APIKeyID), reason: error.Reason });
      expect(JSON.parse(letter.raw.toString('utf8'))).toEqual(mixed[error.Index]);
    }
  });

  it('refuses an event over 1 MiB, keeping its first MiB as the dead letter, and stores the rest', async () => {
    const huge = { event: 'sent', time: 1_500_000_100, MessageID: 911, email: 'huge@example.com', EventID: 'huge-1', pad: 'x'.repeat(MAX_EVENT_BYTES) };
    const fine = { event: 'sent', time: 1_500_000_100, MessageID: 912, email: 'fine@example.com', EventID: 'huge-2', pad: 'x'.repeat(1000) };
    const hugeText = JSON.stringify(huge);
    const lettersBefore = await countRows(t.db, 'dead_letters');
    const res = await post(JSON.stringify([huge, fine]));
    expect(res).toMatchObject({ status: 200, body: { Accepted: 1, Rejected: 1, Errors: [{ Index: 0, Reason: `event is ${hugeText.length} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take` }] } });
    const stored = await t.db.kysely.selectFrom('events').select('event_id').where('event_id', 'like', 'huge-%').execute();
    expect(stored.map((r) => r.event_id)).toEqual(['huge-2']);
    const letters = await t.db.kysely.selectFrom('dead_letters').selectAll().where('id', '>', BigInt(lettersBefore)).execute();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.raw.length).toBe(MAX_EVENT_BYTES);
    expect(letters[0]?.raw.toString('utf8')).toBe(hugeText.slice(0, MAX_EVENT_BYTES));
    expect(letters[0]?.reason).toMatch(new RegExp(`raw: its first ${MAX_EVENT_BYTES} of ${hugeText.length} bytes`));
  });

  it('takes each event on its own: one lossless-json refuses costs only that event, and the log keeps each event as sent', async () => {
    const big = '19421777835146999';
    // A repeated key beside a nested integer past 2^53: lossless-json, which that integer needs, refuses the repeat.
    const dupKey = `{"event":"open","time":1500000000,"MessageID":902,"email":"a@example.com","agent":"A","agent":"B","extra":{"n":${big}},"EventID":"own-1"}`;
    const withBig = `{"event":"sent","time":1500000000,"MessageID":${big},"email":"a@example.com","EventID":"own-2"}`;
    const odd = `{"event":"open","time":1500000001,"MessageID":903,"email":"a@example.com","EventID":"own-3","x":1e400,"y":1.00000000000000001}`;
    const lettersBefore = await countRows(t.db, 'dead_letters');
    const res = await post(`[\n  ${dupKey},\n  ${withBig} , ${odd}\n]`);
    expect(res).toMatchObject({ status: 200, body: { Accepted: 2, Rejected: 1, Errors: [{ Index: 0, Reason: expect.stringMatching(/^event is not valid JSON \(.*agent/) }] } });
    const letters = await t.db.kysely.selectFrom('dead_letters').select('raw').where('id', '>', BigInt(lettersBefore)).execute();
    expect(letters.map((l) => l.raw.toString('utf8'))).toEqual([dupKey]);
    const stored = await sql<{ id: string; m: string; x: string; y: string }>`
      SELECT event_id AS id, message_id::text AS m, (payload->'x')::text AS x, (payload->'y')::text AS y FROM events WHERE event_id IN ('own-2', 'own-3') ORDER BY event_id`.execute(t.db.kysely);
    expect(stored.rows).toEqual([
      { id: 'own-2', m: big, x: null, y: null },
      { id: 'own-3', m: '903', x: expect.stringMatching(/^1(\.0+)?e\+?400$|^1(0{400})$/i), y: '1.00000000000000001' },
    ]);
  });

  it('takes an event nested as deep as the limit, and refuses only the event nested deeper, however deep', async () => {
    // The event object is one level, its array 63 more: 64, as NATS takes it; the request's array is not the event's.
    const at = (depth: number, id: string) => `{"event":"sent","time":1500000300,"MessageID":930,"email":"d@example.com","EventID":"${id}","x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
    const res = await post(`[${at(64, 'deep-64')},${at(65, 'deep-65')},${at(5000, 'deep-5000')}]`);
    const reason = 'event nests arrays or objects deeper than 64 levels';
    expect(res).toMatchObject({ status: 200, body: { Accepted: 1, Rejected: 2, Errors: [{ Index: 1, Reason: reason }, { Index: 2, Reason: reason }] } });
    const stored = await t.db.kysely.selectFrom('events').select('event_id').where('event_id', 'like', 'deep-%').execute();
    expect(stored.map((r) => r.event_id)).toEqual(['deep-64']);
  });

  it('names a bad field once in the reason', async () => {
    const res = await post('[{"event":"open","time":1500000000,"MessageID":1,"email":"ab"}]');
    expect(res.body).toMatchObject({ Rejected: 1, Errors: [{ Index: 0, Reason: 'email: must be an email address' }] });
  });

  it('refuses more than 1000 events in one request with a 400 envelope, storing none', async () => {
    const before = await countRows(t.db, 'events');
    const many = Array.from({ length: 1001 }, (_, i) => ({ event: 'open', time: 1_600_000_000, MessageID: i, email: 'x@example.com' }));
    const res = await post(JSON.stringify(many));
    expect(res).toMatchObject({ status: 400, body: envelope(400, /1001.*1000|1000.*1001/) });
    expect(Object.keys(res.body as object).sort()).toEqual(['ErrorInfo', 'ErrorMessage', 'StatusCode']);
    expect(await countRows(t.db, 'events')).toBe(before);
  });

  it('refuses a body that is not an array, and invalid JSON, with 400', async () => {
    expect(await post(JSON.stringify(batch[0]))).toMatchObject({ status: 400, body: envelope(400, /array/) });
    expect(await post('[{"event":"open",')).toMatchObject({ status: 400, body: envelope(400, /JSON/) });
  });

  it('answers 401 without credentials or with a wrong secret, and 403 for a read-only key', async () => {
    const noAuth = await post(batchText, null);
    expect(noAuth).toMatchObject({ status: 401, body: envelope(401, /authentication/) });
    expect(noAuth.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect(await post(batchText, basic(t.key.ApiKey, `${t.key.SecretKey}x`))).toMatchObject({ status: 401, body: envelope(401, /authentication/) });
    expect(await post(batchText, basic('nosuchkey', t.key.SecretKey))).toMatchObject({ status: 401 });

    const readOnly = await createApiKey(t.db.kysely, { readOnly: true });
    const before = await countRows(t.db, 'events');
    const event = JSON.stringify([{ event: 'open', time: 1_700_000_000, MessageID: 1, email: 'ro@example.com' }]);
    expect(await post(event, basic(readOnly.ApiKey, readOnly.SecretKey))).toMatchObject({ status: 403, body: envelope(403, /read-only/) });
    expect(await countRows(t.db, 'events')).toBe(before);
  });

  it.each([
    ['no credentials', null, 401],
    ['a read-only key', 'read-only', 403],
  ])('answers a request with %s before its body has arrived', async (_name, who, status) => {
    // Headers announcing 10 MB, then 1 KB of body and nothing more: the answer must not wait for
    // (and the server must not buffer) the body of a client it will refuse.
    const authorization = who === null ? null : await (async () => {
      const readOnly = await createApiKey(t.db.kysely, { readOnly: true });
      return basic(readOnly.ApiKey, readOnly.SecretKey);
    })();
    const { port } = new URL(base);
    const socket = net.connect(Number(port), '127.0.0.1');
    const answer = new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1');
        if (text.includes('\r\n\r\n')) resolve(text);
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(text));
    });
    socket.write(
      `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n${authorization === null ? '' : `Authorization: ${authorization}\r\n`}\r\n[${' '.repeat(1024)}`,
    );
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('no answer within 5 s'), 5000));
    try {
      expect((await Promise.race([answer, timeout])).split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Forbidden'}`);
    } finally {
      socket.destroy();
    }
  });
});

describe('GET /status', () => {
  it('reports the log head (the highest position) and the dead-letter count, without auth', async () => {
    const res = await fetch(`${base}/status`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; log: { head: number }; deadLetters: number };
    const head = await sql<{ max: bigint }>`SELECT max(position) AS max FROM events`.execute(t.db.kysely);
    expect(body).toMatchObject({ status: 'ok', log: { head: Number(head.rows[0]?.max) }, deadLetters: await countRows(t.db, 'dead_letters') });
    expect(body.log.head).toBeGreaterThan(10);
    expect(body.deadLetters).toBe(11); // the rejects of the tests above
  });
});

describe('GET /metrics and /status: what POST /v1/events took', () => {
  const counts = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const metric = (outcome: string) => Number(new RegExp(`^mailtally_http_ingest_events_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 'NaN');
    const status = (await (await fetch(`${base}/status`)).json()) as { httpIngest?: Record<string, number> };
    return { metrics: { stored: metric('stored'), duplicates: metric('duplicates'), deadLettered: metric('deadLettered') }, status: status.httpIngest, text };
  };

  it('counts events stored, duplicates and dead letters, and names Node’s own metrics once', async () => {
    const before = await counts();
    const fresh = { event: 'sent', time: 1_700_000_000, MessageID: 991, email: 'm@example.com', EventID: 'metrics-1' };
    const res = await post(JSON.stringify([fresh, fresh, { event: 'sent', time: 1 }]));
    expect(res.body).toMatchObject({ Accepted: 1, Duplicates: 1, Rejected: 1 });
    const after = await counts();
    expect(after.metrics).toEqual({ stored: before.metrics.stored + 1, duplicates: before.metrics.duplicates + 1, deadLettered: before.metrics.deadLettered + 1 });
    expect(after.status).toEqual(after.metrics);
    expect(after.text).toMatch(/^mailtally_process_cpu_seconds_total /m);
    expect(after.text).not.toMatch(/mailtally_process_process_|mailtally_process_nodejs_/);
  });
});

describe('methods the service routes outside /v3/REST do not take', () => {
  it('answer 405 in the error envelope with Allow, before any credentials or body', async () => {
    const cases = [
      ['GET', '/v1/events', 'POST'],
      ['PUT', '/status', 'GET, HEAD'],
      ['DELETE', '/metrics', 'GET, HEAD'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['GET', '/v1/webhooks/replay', 'POST'],
      ['OPTIONS', '/v1/webhooks/attempts', 'GET, HEAD'],
    ] as const;
    for (const [method, path, allow] of cases) {
      const res = await fetch(`${base}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow);
      expect(await res.json()).toEqual(envelope(405, `Method ${method} is not allowed on this resource; use ${allow}`));
    }
  });
});
