import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Db, connectDb } from '../../src/db/connect.js';
import { NatsIngest, type NatsIngestOptions } from '../../src/ingest/nats-ingest.js';
import { TenantDirectory } from '../../src/ingest/tenants.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { readEventsAfter } from '../../src/log/read.js';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../support/events.js';
import { type TestEnv, capturingLogger, countRows, createTestEnv, quietLogger, waitFor } from '../support/harness.js';
import { NATS_URL } from '../support/services.js';
import { postgresBehindProxy } from '../support/tcp-proxy.js';

let t: TestEnv;
let nc: NatsConnection;
let js: JetStreamClient;
const running: { ingest: NatsIngest; db: Db | null }[] = [];

function options(): NatsIngestOptions {
  const nats = t.config.nats;
  if (nats === null) throw new Error('test env has no NATS');
  return { stream: nats.stream, subjectPrefix: nats.subjectPrefix, consumer: nats.consumer, ackWaitMs: 3000, maxAckPending: 4000, batchSize: 500, batchWaitMs: 5, pipeline: 2 };
}

/** Starts an ingest worker; with `db` it writes through that connection (e.g. via a proxy). */
async function startIngest(db: Db | null = null): Promise<NatsIngest> {
  const target = db ?? t.db;
  const ingest = new NatsIngest(nc, target, new TenantDirectory(target.kysely), options(), quietLogger());
  await ingest.start();
  running.push({ ingest, db });
  return ingest;
}

/** Publishes an event; returns its stream sequence. */
async function publish(event: Record<string, unknown> | string, opts: { apiKeyId?: string; msgID?: string; subject?: string } = {}): Promise<number> {
  const text = typeof event === 'string' ? event : withBareMessageId(event);
  const type = typeof event === 'string' ? 'open' : String(event['event']);
  const ack = await js.publish(opts.subject ?? t.subject(opts.apiKeyId ?? t.key.APIKeyID, type), text, opts.msgID !== undefined ? { msgID: opts.msgID } : {});
  return ack.seq;
}

function manyEvents(n: number, tag: string): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, i) => ({ event: 'open', time: 1_700_000_000 + i, MessageID: String(10n ** 18n + BigInt(i)), email: `u${i}@gmail.com`, EventID: `${tag}-${i}` }));
}

beforeAll(async () => {
  t = await createTestEnv();
  nc = await connect({ servers: NATS_URL });
  js = jetstream(nc);
});

afterEach(async () => {
  for (const r of running.splice(0)) {
    await r.ingest.stop();
    await r.db?.close();
  }
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(options().stream).catch(() => undefined);
  await nc.close();
  await t.cleanup();
});

describe('NATS ingest', () => {
  it('creates the stream, stores every event type, and keeps a 64-bit MessageID exact', async () => {
    await startIngest();
    const events = sampleEvents();
    const seqs: number[] = [];
    for (const e of events) seqs.push(await publish(e));
    await waitFor('all sample events', async () => (await countRows(t.db, 'events')) === events.length);
    const rows = await readEventsAfter(t.db.kysely, 0n, 100);
    expect(rows.map((r) => r.type).sort()).toEqual(events.map((e) => String(e['event'])).sort());
    const sent = rows.find((r) => r.type === 'sent');
    expect(sent?.message_id).toBe(BIG_MESSAGE_ID);
    expect(sent?.nats_seq).toBeTypeOf('bigint');
    // each row names the stream sequence of the message it came from
    expect(rows.map((r) => Number(r.nats_seq)).sort((a, b) => a - b)).toEqual(seqs);
    const exact = await sql<{ id: string }>`SELECT payload->>'MessageID' AS id FROM events WHERE type = 'sent'`.execute(t.db.kysely);
    expect(exact.rows[0]?.id).toBe(BIG_MESSAGE_ID);
  });

  it('stores each event once: published twice, with and without Nats-Msg-Id, and after redelivery', async () => {
    const before = await countRows(t.db, 'events');
    const events = manyEvents(300, 'dup');
    await startIngest();
    for (const e of events) await publish(e, { msgID: String(e['EventID']) });
    for (const e of events) await publish(e, { msgID: String(e['EventID']) }); // NATS drops these
    for (const e of events) await publish(e); // these reach ingest and the unique index drops them
    await waitFor('the stream to be drained', async () => {
      const info = await (await jetstreamManager(nc)).consumers.info(options().stream, options().consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
    expect(await countRows(t.db, 'events')).toBe(before + events.length);
  });

  it('keeps two tenants` events that share an EventID used as their Nats-Msg-Id, as the contract suggests, unless sent within 100 ms', async () => {
    const other = await createApiKey(t.db.kysely);
    await startIngest();
    const event = (apiKeyId: string) => ({ event: 'sent', time: 1_700_000_000, MessageID: '77', email: 'shared@example.com', EventID: 'shared-1', APIKeyID: Number(apiKeyId) });
    await publish(event(t.key.APIKeyID), { msgID: 'shared-1' });
    // The stream's window is its least, 100 ms (a 2-minute one dropped the second tenant's event).
    await new Promise((r) => setTimeout(r, 250));
    await publish(event(other.APIKeyID), { apiKeyId: other.APIKeyID, msgID: 'shared-1' });
    const stored = async () =>
      (await sql<{ n: number }>`SELECT count(DISTINCT api_key_id)::int AS n FROM events WHERE event_id = 'shared-1'`.execute(t.db.kysely)).rows[0]?.n;
    await waitFor('both tenants` events stored', async () => (await stored()) === 2);
    const info = await (await jetstreamManager(nc)).streams.info(options().stream);
    expect(info.config.duplicate_window).toBe(100 * 1e6);
  });

  it('warns once, naming the command, when the stream it finds keeps a Nats-Msg-Id for longer than 100 ms', async () => {
    const jsm = await jetstreamManager(nc);
    const o = options();
    const stream = `${o.stream}_LONG`;
    const prefix = `${o.subjectPrefix}-long`;
    // An operator's stream with NATS's default 2-minute window.
    await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`] });
    const captured = capturingLogger('warn');
    const ingest = new NatsIngest(nc, t.db, new TenantDirectory(t.db.kysely), { ...o, stream, subjectPrefix: prefix, consumer: `${o.consumer}_long` }, captured.log);
    try {
      await ingest.start();
      const warnings = captured.lines().filter((l) => String(l['msg']).includes('Nats-Msg-Id'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ duplicateWindowMs: 120_000, msg: expect.stringContaining(`nats stream edit ${stream} --dupe-window 100ms`) });
    } finally {
      await ingest.stop();
      await jsm.streams.delete(stream);
    }
  });

  it('dead-letters poison messages with their reason and keeps going', async () => {
    await startIngest();
    const deadBefore = await countRows(t.db, 'dead_letters');
    const eventsBefore = await countRows(t.db, 'events');
    const valid = manyEvents(20, 'mixed');
    const poison: [string | Record<string, unknown>, { apiKeyId?: string; subject?: string }, RegExp][] = [
      ['\u0000\u0001garbage', {}, /not valid JSON/],
      ['{"event":"open","time":"soon","MessageID":1,"email":"a@b.co"}', {}, /^time: must be Unix seconds/],
      ['[1,2,3]', {}, /must be a JSON object/],
      [{ event: 'open', time: 1, MessageID: 1, email: 'a@b.co' }, { apiKeyId: '999999' }, /unknown APIKeyID 999999/],
      [{ event: 'open', time: 1, MessageID: 1, email: 'a@b.co' }, { subject: `${options().subjectPrefix}.notanid.open` }, /is not .*<APIKeyID>\.<event>/],
      [{ event: 'click', time: 1, MessageID: 1, email: 'a@b.co' }, {}, /^url: is required/],
    ];
    for (const [i, e] of valid.entries()) {
      await publish(e);
      const p = i % 3 === 0 ? poison[i / 3] : undefined;
      if (p !== undefined) await publish(p[0], p[1]);
    }
    await js.publish(t.subject(t.key.APIKeyID, 'open'), new Uint8Array([0x7b, 0xff, 0x7d]));
    await waitFor('valid events stored and poison dead-lettered', async () => {
      return (await countRows(t.db, 'events')) === eventsBefore + valid.length && (await countRows(t.db, 'dead_letters')) === deadBefore + poison.length + 1;
    });
    const letters = await t.db.kysely.selectFrom('dead_letters').select(['reason', 'source', 'subject', 'raw']).where('source', '=', 'nats').execute();
    for (const [, , reason] of poison) expect(letters.some((l) => reason.test(l.reason))).toBe(true);
    expect(letters.some((l) => l.reason === 'body is not valid UTF-8' && Buffer.from(l.raw).equals(Buffer.from([0x7b, 0xff, 0x7d])))).toBe(true);

    // still running: more valid events go through
    for (const e of manyEvents(5, 'after-poison')) await publish(e);
    await waitFor('events after the poison', async () => (await countRows(t.db, 'events')) === eventsBefore + valid.length + 5);
  });

  it('says so when it changes the settings of the shared consumer that another ingest process set', async () => {
    await startIngest();
    const captured = capturingLogger('warn');
    const other = new NatsIngest(nc, t.db, new TenantDirectory(t.db.kysely), { ...options(), ackWaitMs: 4000 }, captured.log);
    running.push({ ingest: other, db: null });
    await other.start();
    const warnings = captured.lines().filter((l) => String(l['msg']).includes('had other settings'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ was: { ackWaitMs: 3000, maxAckPending: 4000 }, now: { ackWaitMs: 4000, maxAckPending: 4000 } });
  });

  it('dead-letters the events of a key deleted while it runs, once what it knows of the keys is older than their age', async () => {
    const ingest = new NatsIngest(nc, t.db, new TenantDirectory(t.db.kysely, 300), options(), quietLogger());
    await ingest.start();
    running.push({ ingest, db: null });
    const key = await createApiKey(t.db.kysely);
    const stored = () => t.db.kysely.selectFrom('events').select('event_id').where('api_key_id', '=', BigInt(key.APIKeyID)).execute();
    await publish({ event: 'open', time: 1_700_000_000, MessageID: '71', email: 'gone@example.com', EventID: 'gone-1' }, { apiKeyId: key.APIKeyID });
    await waitFor('the key\'s first event stored', async () => (await stored()).length === 1);
    await t.db.kysely.deleteFrom('api_keys').where('api_key_id', '=', BigInt(key.APIKeyID)).execute();
    await new Promise((r) => setTimeout(r, 400));
    await publish({ event: 'open', time: 1_700_000_001, MessageID: '72', email: 'gone@example.com', EventID: 'gone-2' }, { apiKeyId: key.APIKeyID });
    await waitFor('the event after the delete dead-lettered', async () => {
      const letters = await t.db.kysely.selectFrom('dead_letters').select('reason').where('reason', 'like', `unknown APIKeyID ${key.APIKeyID} in subject %`).execute();
      return letters.length === 1;
    });
    expect((await stored()).map((r) => r.event_id)).toEqual(['gone-1']);
  });

  it('loses nothing while Postgres is unreachable, and stores everything once when it is back', async () => {
    const { proxy, url: viaProxy } = await postgresBehindProxy(t.env['DATABASE_URL'] as string);
    const db = await connectDb({ kind: 'postgres', url: viaProxy.toString(), poolSize: 4 });
    try {
      const before = await countRows(t.db, 'events');
      const ingest = await startIngest(db);
      const events = manyEvents(3000, 'outage');
      const half = events.length / 2;
      for (const e of events.slice(0, half)) await publish(e);
      await waitFor('some events stored before the outage', async () => (await countRows(t.db, 'events')) > before);
      await proxy.cut();
      for (const e of events.slice(half)) await publish(e);
      await waitFor('ingest to notice the outage', async () => ingest.stats.failedBatches > 0);
      await new Promise((r) => setTimeout(r, 1500));
      await proxy.restore();
      await waitFor('every event stored after recovery', async () => (await countRows(t.db, 'events')) === before + events.length, 60_000);
      const ids = await sql<{ n: string }>`SELECT count(DISTINCT event_id) AS n FROM events WHERE event_id LIKE 'outage-%'`.execute(t.db.kysely);
      expect(Number(ids.rows[0]?.n)).toBe(events.length);
    } finally {
      await proxy.stop();
    }
  });

  it('survives its Postgres connections being killed mid-stream', async () => {
    const before = await countRows(t.db, 'events');
    const ingest = await startIngest();
    const events = manyEvents(4000, 'killed');
    let killed = 0;
    // Often enough that some kill lands on a batch in flight, not only on idle pooled connections.
    for (const [i, e] of events.entries()) {
      await publish(e);
      if (i % 100 === 50) {
        const r = await sql<{ n: number }>`
          SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()`.execute(t.db.kysely);
        killed += r.rows[0]?.n ?? 0;
      }
    }
    await waitFor('every event stored once', async () => (await countRows(t.db, 'events')) === before + events.length, 60_000);
    expect(killed).toBeGreaterThan(0);
    const ids = await sql<{ n: string }>`SELECT count(DISTINCT event_id) AS n FROM events WHERE event_id LIKE 'killed-%'`.execute(t.db.kysely);
    expect(Number(ids.rows[0]?.n)).toBe(events.length);
    expect(ingest.stats.failedBatches).toBeGreaterThan(0);
  });

  it('shares the durable consumer between two ingest workers without doubling anything', async () => {
    const before = await countRows(t.db, 'events');
    const a = await startIngest();
    const b = await startIngest();
    const events = manyEvents(4000, 'two-workers');
    await Promise.all(events.map((e) => publish(e)));
    await waitFor('every event stored', async () => (await countRows(t.db, 'events')) === before + events.length);
    expect(a.stats.received).toBeGreaterThan(0);
    expect(b.stats.received).toBeGreaterThan(0);
    expect(a.stats.stored + b.stats.stored).toBe(events.length);
  });
});
