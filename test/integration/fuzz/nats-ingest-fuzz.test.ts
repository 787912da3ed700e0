import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsIngest, type NatsIngestOptions } from '../../../src/ingest/nats-ingest.js';
import { TenantDirectory } from '../../../src/ingest/tenants.js';
import { type CreatedApiKey, createApiKey } from '../../../src/keys/key-store.js';
import { type TestEnv, countRows, createTestEnv, quietLogger, waitFor } from '../../support/harness.js';
import { NATS_URL } from '../../support/services.js';
import { type Json, type ValueCase, eventCase, jsonText, malformedBytes, validEvent } from './raw-event-arbitraries.js';

/**
 * Thousands of fuzzed raw events — valid ones of every type mixed with garbage bytes, bad UTF-8,
 * non-objects, wrong types, missing fields, out-of-range ids, oversized fields, unknown types,
 * bad subjects, an APIKeyID that is not the subject's — published to real NATS JetStream and
 * consumed by a real ingest writing to real Postgres. Each published message is followed by its
 * stream sequence: every valid event is in the log exactly once, every malformed message is a
 * dead letter with a reason, and ingest is still consuming afterwards.
 */

const SEED = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31);
const VALUE_CASES = 2400;
const OTHER_TENANT_CASES = 300;
const BYTE_CASES = 300;
const SUBJECT_CASES = 300;

let t: TestEnv;
let other: CreatedApiKey;
let nc: NatsConnection;
let js: JetStreamClient;
let ingest: NatsIngest;

function options(): NatsIngestOptions {
  const nats = t.config.nats;
  if (nats === null) throw new Error('test env has no NATS');
  return { stream: nats.stream, subjectPrefix: nats.subjectPrefix, consumer: nats.consumer, ackWaitMs: 30_000, maxAckPending: 4000, batchSize: 500, batchWaitMs: 5, pipeline: 2 };
}

beforeAll(async () => {
  t = await createTestEnv();
  other = await createApiKey(t.db.kysely);
  nc = await connect({ servers: NATS_URL });
  js = jetstream(nc);
  ingest = new NatsIngest(nc, t.db, new TenantDirectory(t.db.kysely), options(), quietLogger());
  await ingest.start();
});

afterAll(async () => {
  await ingest?.stop();
  await nc?.close();
  await t?.cleanup();
});

interface Message {
  subject: string;
  bytes: Uint8Array;
  msgId?: string;
  valid: boolean;
  why: string;
  /** The valid event's MessageID as the log must hold it (null for campaign events without one). */
  messageId?: string | null;
  /** Index of the case this message is a copy of (a re-published duplicate). */
  copyOf?: number;
}

const enc = new TextEncoder();

/** The decimal string a valid MessageID spelling stands for. */
function expectedMessageId(value: Json | undefined): string | null {
  if (value === undefined || value === null) return null;
  return BigInt(String(value).trim()).toString();
}

function buildMessages(): Message[] {
  const a = t.key.APIKeyID;
  const b = other.APIKeyID;
  const subject = (key: string, event: string) => t.subject(key, event);
  const fromCase = (key: string) => (c: ValueCase): Message => {
    const obj = c.value !== null && typeof c.value === 'object' && !Array.isArray(c.value) ? (c.value as Record<string, Json>) : null;
    const eventId = obj?.['EventID'];
    return {
      subject: subject(key, c.event),
      bytes: enc.encode(jsonText(c.value)),
      ...(c.valid && typeof eventId === 'string' ? { msgId: eventId } : {}),
      valid: c.valid,
      why: c.why,
      ...(c.valid ? { messageId: expectedMessageId(obj?.['MessageID']) } : {}),
    };
  };
  const cases = fc.sample(eventCase(a, b), { numRuns: VALUE_CASES, seed: SEED }).map(fromCase(a));
  const otherTenant = fc.sample(eventCase(b, a, 0.8), { numRuns: OTHER_TENANT_CASES, seed: SEED + 1 }).map(fromCase(b));
  const bytes = fc.sample(malformedBytes(a), { numRuns: BYTE_CASES, seed: SEED + 2 }).map(
    (m): Message => ({ subject: subject(a, m.event), bytes: m.bytes, valid: false, why: m.why }),
  );
  const prefix = t.env['NATS_SUBJECT_PREFIX'] as string;
  const badSubject = fc.tuple(
    validEvent(a),
    fc.constantFrom(
      (ev: string) => [`${prefix}.notanid.${ev}`, 'bad subject'],
      (ev: string) => [`${prefix}.0.${ev}`, 'bad subject'],
      (ev: string) => [`${prefix}.-1.${ev}`, 'bad subject'],
      (ev: string) => [`${prefix}.0${a}.${ev}`, 'bad subject'],
      (ev: string) => [`${prefix}.${a}.${ev}.extra`, 'bad subject'],
      () => [`${prefix}.${a}`, 'bad subject'],
      (ev: string) => [`${prefix}.99999999999999999999.${ev}`, 'bad subject'],
      (ev: string) => [`${prefix}.987654321.${ev}`, 'unknown APIKeyID'],
      () => [`${prefix}.${a}.bogus`, 'subject event differs'],
      (ev: string) => [`${prefix}.${a}.${ev === 'open' ? 'click' : 'open'}`, 'subject event differs'],
      (ev: string) => [`${prefix}.${b}.${ev}`, 'APIKeyID not the subject`s'],
    ),
  );
  const subjects = fc.sample(badSubject, { numRuns: SUBJECT_CASES, seed: SEED + 3 }).map(([e, make]): Message => {
    const [subj, why] = make(String(e['event']));
    // The body names its tenant, so a subject naming another key is a mismatch, not a transfer.
    return { subject: subj as string, bytes: enc.encode(jsonText({ ...e, APIKeyID: a })), valid: false, why: why as string };
  });
  const all = [...cases, ...otherTenant, ...bytes, ...subjects];
  // Shuffle deterministically, then re-publish some valid events (same bytes, no Nats-Msg-Id).
  const order = fc.sample(fc.shuffledSubarray(all.map((_, i) => i), { minLength: all.length, maxLength: all.length }), { numRuns: 1, seed: SEED + 4 })[0] as number[];
  const shuffled = order.map((i) => all[i] as Message);
  const copies = shuffled.flatMap((m, i): Message[] => (m.valid && i % 20 === 0 ? [{ ...m, copyOf: i }] : []));
  for (const m of copies) delete m.msgId;
  return [...shuffled, ...copies];
}

/** Publishes each message and returns its stream sequence (in the order given). */
async function publish(messages: readonly Message[], window = 256): Promise<number[]> {
  const seqs: number[] = new Array<number>(messages.length);
  const inFlight = new Set<Promise<void>>();
  for (const [i, m] of messages.entries()) {
    while (inFlight.size >= window) await Promise.race(inFlight);
    const job = js
      .publish(m.subject, m.bytes, m.msgId !== undefined ? { msgID: m.msgId } : {})
      .then((ack) => {
        seqs[i] = ack.seq;
      })
      .finally(() => inFlight.delete(job));
    inFlight.add(job);
  }
  await Promise.all(inFlight);
  return seqs;
}

async function drained(): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await waitFor(
    'the stream to be drained',
    async () => {
      const info = await jsm.consumers.info(options().stream, options().consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    60_000,
    100,
  );
}

/** Reasons a category of malformed input must be given (the rest: any non-empty reason). */
const REASONS: [RegExp, RegExp][] = [
  [/^bad UTF-8/, /^body is not valid UTF-8$/],
  [/^garbage bytes$/, /UTF-8|JSON|object/],
  [/^truncated JSON$|^not an event/, /JSON|object|is required|must be one of/],
  [/^bad subject$/, /^subject .* is not .*<APIKeyID>\.<event>$/],
  [/^unknown APIKeyID$/, /^unknown APIKeyID 987654321/],
  [/^subject event differs$/, /does not match the subject's event/],
  [/^APIKeyID not/, /APIKeyID/],
  [/^NUL character$/, /NUL/],
  [/^lone surrogate/, /^event contains a lone UTF-16 surrogate/],
  [/^bad time$|^missing time$/, /^time: /],
  [/^bad MessageID$|^missing MessageID$/, /^MessageID: /],
  [/^bad email$|^missing email$/, /^email: /],
  [/^unknown event type$|^missing event$/, /^event: /],
  [/^oversized (\w+)$/, /is longer than/],
];

describe('NATS ingest under fuzzed input', () => {
  it(`stores every valid event once, dead-letters every malformed message with a reason, and keeps consuming (seed ${SEED})`, async () => {
    const messages = buildMessages();
    const malformed = messages.filter((m) => !m.valid);
    const valid = messages.filter((m) => m.valid && m.copyOf === undefined);
    expect(malformed.length).toBeGreaterThan(1000);
    expect(valid.length).toBeGreaterThan(1500);

    const seqs = await publish(messages);
    const seqOf = new Map(messages.map((m, i) => [m, seqs[i] as number]));
    const bySeq = new Map(messages.map((m, i) => [seqs[i] as number, m]));
    // Nats-Msg-Id duplicates are dropped by the stream; count only what it kept.
    expect(new Set(seqs).size).toBe(messages.length);

    await waitFor(
      'every message stored or dead-lettered',
      async () => (await countRows(t.db, 'events')) >= valid.length && (await countRows(t.db, 'dead_letters')) >= malformed.length,
      60_000,
      100,
    );
    await drained();

    // Every malformed message, and only those, is a dead letter with a reason.
    const letters = await t.db.kysely.selectFrom('dead_letters').select(['nats_seq', 'reason', 'source', 'raw', 'subject']).execute();
    expect(letters.every((l) => l.source === 'nats')).toBe(true);
    expect(letters.length, `seed ${SEED}`).toBe(malformed.length);
    expect(new Set(letters.map((l) => Number(l.nats_seq)))).toEqual(new Set(malformed.map((m) => seqOf.get(m))));
    for (const l of letters) {
      const m = bySeq.get(Number(l.nats_seq)) as Message;
      expect(l.reason.trim(), m.why).not.toBe('');
      expect(Buffer.from(l.raw).equals(Buffer.from(m.bytes)), m.why).toBe(true);
      expect(l.subject).toBe(m.subject);
      for (const [why, reason] of REASONS) if (why.test(m.why)) expect(l.reason, `${m.why} (seed ${SEED})`).toMatch(reason);
    }

    // Every valid event is in the log exactly once (its first copy or its re-publication).
    const rows = await t.db.kysely.selectFrom('events').select(['nats_seq', 'message_id', 'api_key_id']).execute();
    expect(rows.length, `seed ${SEED}`).toBe(valid.length);
    const copies = new Map(messages.filter((m) => m.copyOf !== undefined).map((m) => [seqOf.get(messages[m.copyOf as number] as Message), seqOf.get(m)]));
    const stored = new Set(rows.map((r) => Number(r.nats_seq)));
    for (const m of valid) {
      const seq = seqOf.get(m) as number;
      const copy = copies.get(seq);
      expect(stored.has(seq) || (copy !== undefined && stored.has(copy)), `${m.why} #${seq} (seed ${SEED})`).toBe(true);
    }
    for (const r of rows) {
      const m = bySeq.get(Number(r.nats_seq)) as Message;
      expect(m.valid).toBe(true);
      expect(r.message_id === null ? null : String(r.message_id)).toBe(m.messageId);
      expect(String(r.api_key_id)).toBe(m.subject.split('.').at(-2));
    }
    expect(ingest.stats, JSON.stringify({ ...ingest.stats, published: messages.length })).toMatchObject({ deadLettered: malformed.length });
    expect(ingest.stats.stored).toBe(valid.length);

    // Still consuming.
    const after = fc.sample(validEvent(t.key.APIKeyID), { numRuns: 20, seed: SEED + 5 });
    for (const e of after) await js.publish(t.subject(t.key.APIKeyID, String(e['event'])), jsonText(e));
    await waitFor('events published after the fuzz', async () => (await countRows(t.db, 'events')) === valid.length + after.length);
  });
});
