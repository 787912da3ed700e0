import { sql } from 'kysely';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../support/events.js';
import { type TestEnv, countRows, createTestEnv, waitFor } from '../support/harness.js';
import { type JetStreamHandle, type OutgoingMessage, createStream, deleteStreamQuietly, openJetStream, publishAll } from '../support/jetstream.js';
import { type Proc, spawnCli, stopAll } from '../support/processes.js';

/**
 * The NATS ingest process dies hard (SIGKILL) in the middle of a stream of events and is
 * restarted: the log must end up with every event exactly once. A graceful stop (SIGTERM) must
 * exit 0 promptly and lose nothing either.
 */

const DISTINCT = 30_000;
const REPUBLISHED = 1_500; // extra copies without Nats-Msg-Id: the stream keeps them, the log must not

const envs: TestEnv[] = [];
const handles: JetStreamHandle[] = [];

afterEach(async () => {
  await stopAll();
});

afterAll(async () => {
  await stopAll();
  for (const h of handles) await h.close().catch(() => {});
  for (const t of envs) {
    await deleteStreamQuietly(t.env['NATS_URL'] as string, t.env['NATS_STREAM'] as string);
    await t.cleanup();
  }
});

async function setup(): Promise<{ t: TestEnv; h: JetStreamHandle; ids: Set<string> }> {
  const t = await createTestEnv();
  envs.push(t);
  const h = await openJetStream(t.env['NATS_URL'] as string);
  handles.push(h);
  await createStream(h, t.env['NATS_STREAM'] as string, t.env['NATS_SUBJECT_PREFIX'] as string);
  const messages = eventMessages(t);
  const stored = await publishAll(h, [...messages, ...messages.slice(0, REPUBLISHED).map((m) => ({ subject: m.subject, body: m.body }))]);
  expect(stored).toBe(DISTINCT + REPUBLISHED);
  return { t, h, ids: new Set(messages.map((m) => m.msgId as string)) };
}

/** DISTINCT events of every message type, with their own EventIDs and 64-bit MessageIDs. */
function eventMessages(t: TestEnv): OutgoingMessage[] {
  const templates = sampleEvents().filter((e) => e.event !== 'campaign');
  const out: OutgoingMessage[] = [];
  for (let i = 0; i < DISTINCT; i++) {
    const template = templates[i % templates.length] as Record<string, unknown>;
    const eventId = `crash-${i}`;
    const event = {
      ...template,
      MessageID: (BigInt(BIG_MESSAGE_ID) + BigInt(Math.floor(i / templates.length))).toString(),
      time: (template['time'] as number) + i,
      EventID: eventId,
    };
    out.push({ subject: t.subject(t.key.APIKeyID, String(template['event'])), body: withBareMessageId(event), msgId: eventId });
  }
  return out;
}

function startIngest(t: TestEnv, extra: Record<string, string> = {}): Proc {
  // LOG_LEVEL=info for the "mailtally started" line; small batches so a kill lands mid-stream.
  return spawnCli(['serve', '--roles', 'ingest'], { env: { ...t.env, LOG_LEVEL: 'info', INGEST_BATCH_SIZE: '200', ...extra } });
}

async function started(p: Proc): Promise<void> {
  await p.serverUrl(60_000);
}

/** Waits until the log holds at least `min` events, polling fast; fails at once if `p` dies. */
async function waitForCount(t: TestEnv, p: Proc, what: string, min: number, timeoutMs = 60_000): Promise<number> {
  let n = 0;
  const check = async () => {
    if (p.exit !== null) throw new Error(`ingest exited (${JSON.stringify(p.exit)}) while waiting for ${what}\n${p.describe()}`);
    return (n = await countRows(t.db, 'events')) >= min;
  };
  await waitFor(what, check, timeoutMs, 5);
  return n;
}

/** Every message has been acked: nothing pending, nothing awaiting redelivery. */
async function waitForConsumerDrained(t: TestEnv, h: JetStreamHandle): Promise<void> {
  await waitFor(
    'the ingest consumer to have acked every message',
    async () => {
      const info = await h.jsm.consumers.info(t.env['NATS_STREAM'] as string, t.env['NATS_CONSUMER'] as string);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    60_000,
    100,
  );
}

async function assertExactlyOnce(t: TestEnv, ids: Set<string>): Promise<void> {
  const apiKeyId = BigInt(t.key.APIKeyID);
  const totals = await sql<{ n: bigint; distinct_ids: bigint; other_tenants: bigint }>`
    SELECT count(*) AS n, count(DISTINCT (api_key_id, event_id)) AS distinct_ids,
           count(*) FILTER (WHERE api_key_id <> ${apiKeyId}) AS other_tenants
    FROM events`.execute(t.db.kysely);
  expect(totals.rows[0]).toEqual({ n: BigInt(DISTINCT), distinct_ids: BigInt(DISTINCT), other_tenants: 0n });

  const doubled = await sql<{ event_id: string }>`
    SELECT event_id FROM events GROUP BY api_key_id, event_id HAVING count(*) > 1 LIMIT 5`.execute(t.db.kysely);
  expect(doubled.rows).toEqual([]);

  const stored = await t.db.kysely.selectFrom('events').select('event_id').execute();
  const storedIds = new Set(stored.map((r) => r.event_id));
  expect([...ids].filter((id) => !storedIds.has(id))).toEqual([]);
  expect([...storedIds].filter((id) => !ids.has(id))).toEqual([]);

  // The 64-bit MessageIDs went through intact, and nothing was dead-lettered.
  const big = await sql<{ message_id: string; from_payload: string }>`
    SELECT message_id::text AS message_id, payload->>'MessageID' AS from_payload FROM events WHERE event_id = 'crash-0'`.execute(t.db.kysely);
  expect(big.rows).toEqual([{ message_id: BIG_MESSAGE_ID, from_payload: BIG_MESSAGE_ID }]);
  expect(await countRows(t.db, 'dead_letters')).toBe(0);
}

describe('NATS ingest across crashes', () => {
  it('SIGKILL mid-batch (twice) and restart: nothing lost, nothing doubled', { timeout: 240_000 }, async () => {
    const { t, h, ids } = await setup();

    const first = startIngest(t);
    await started(first);
    await waitForCount(t, first, 'the first events in the log', 2_000);
    first.signal('SIGKILL');
    expect(await first.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    const afterFirstKill = await countRows(t.db, 'events');
    expect(afterFirstKill).toBeGreaterThan(0);
    expect(afterFirstKill).toBeLessThan(DISTINCT); // the kill really landed mid-stream

    const second = startIngest(t);
    await started(second);
    await waitForCount(t, second, 'progress after the first restart', afterFirstKill + 2_000);
    second.signal('SIGKILL');
    expect(await second.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    const afterSecondKill = await countRows(t.db, 'events');
    expect(afterSecondKill).toBeLessThan(DISTINCT);

    const third = startIngest(t);
    await started(third);
    await waitForCount(t, third, `all ${DISTINCT} distinct events in the log`, DISTINCT, 120_000);
    await waitForConsumerDrained(t, h);
    expect(await third.stop(10_000)).toEqual({ code: 0, signal: null });

    await assertExactlyOnce(t, ids);
  });

  it('SIGTERM while events flow: exits 0 within seconds, and a restart completes the log exactly once', { timeout: 240_000 }, async () => {
    const { t, h, ids } = await setup();

    const first = startIngest(t);
    await started(first);
    await waitForCount(t, first, 'the first events in the log', 2_000);
    first.signal('SIGTERM');
    const exit = await first.waitForExit(10_000);
    expect(exit, first.describe()).toEqual({ code: 0, signal: null });
    expect(first.jsonLines().some((l) => l['msg'] === 'stopped')).toBe(true);
    const afterStop = await countRows(t.db, 'events');
    expect(afterStop).toBeLessThan(DISTINCT);

    const second = startIngest(t);
    await started(second);
    await waitForCount(t, second, `all ${DISTINCT} distinct events in the log`, DISTINCT, 120_000);
    await waitForConsumerDrained(t, h);
    expect(await second.stop(10_000)).toEqual({ code: 0, signal: null });

    await assertExactlyOnce(t, ids);
  });

  it('with two ingest worker threads: SIGKILL mid-stream, then SIGTERM, then a restart: exactly once', { timeout: 240_000 }, async () => {
    const { t, h, ids } = await setup();
    const workers = { INGEST_WORKERS: '2' };

    const first = startIngest(t, workers);
    await started(first);
    await waitForCount(t, first, 'the first events in the log', 2_000);
    first.signal('SIGKILL');
    expect(await first.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    const afterKill = await countRows(t.db, 'events');
    expect(afterKill).toBeLessThan(DISTINCT);

    const second = startIngest(t, workers);
    await started(second);
    await waitForCount(t, second, 'progress after the restart', afterKill + 2_000);
    second.signal('SIGTERM');
    expect(await second.waitForExit(15_000), second.describe()).toEqual({ code: 0, signal: null });
    expect(await countRows(t.db, 'events')).toBeLessThan(DISTINCT);

    const third = startIngest(t, workers);
    await started(third);
    await waitForCount(t, third, `all ${DISTINCT} distinct events in the log`, DISTINCT, 120_000);
    await waitForConsumerDrained(t, h);
    expect(await third.stop(15_000)).toEqual({ code: 0, signal: null });

    await assertExactlyOnce(t, ids);
  });
});
