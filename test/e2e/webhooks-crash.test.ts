import { sql } from 'kysely';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readCheckpoint } from '../../src/log/checkpoints.js';
import { logHead } from '../../src/log/read.js';
import { createCallbackUrl } from '../../src/webhooks/callback-url-store.js';
import { WEBHOOKS_CHECKPOINT } from '../../src/webhooks/fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT } from '../../src/webhooks/first-attempts-ledger.js';
import { BIG_MESSAGE_ID } from '../support/events.js';
import { type TestEnv, createTestEnv, waitFor } from '../support/harness.js';
import { type Proc, spawnCli, stopAll } from '../support/processes.js';
import { append } from '../support/projections.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The dispatcher as its own process (`mailtally serve --roles dispatcher`) is SIGKILLed twice
 * while requests are in flight and restarted: every event reaches its URL, and once the
 * receiver dedupes by webhook-id each is there exactly once — Version 1 and Version 2 alike.
 * A SIGTERM drains what is in flight and exits 0.
 */

const SENT = 1500;
const OPENS = 1500;
const envs: TestEnv[] = [];
const receivers: WebhookReceiver[] = [];

afterEach(async () => {
  await stopAll();
});
afterAll(async () => {
  await stopAll();
  for (const r of receivers) await r.close();
  for (const t of envs) await t.cleanup();
});

function startDispatcher(t: TestEnv): Proc {
  return spawnCli(['serve', '--roles', 'dispatcher'], {
    env: {
      ...t.env,
      PORT: '0',
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOWLIST: '127.0.0.1/32',
      WEBHOOK_TIMEOUT_MS: '1000',
      WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2,0.2,0.2',
      WEBHOOK_URL_CONCURRENCY: '16',
      WEBHOOK_BATCH_WINDOW_MS: '100',
      WEBHOOK_BATCH_MAX_EVENTS: '20',
      WEBHOOK_POLL_MS: '50',
      WEBHOOK_LEASE_MS: '1500',
      WEBHOOK_FANOUT_BATCH_SIZE: '200',
    },
  });
}

async function started(p: Proc): Promise<void> {
  await p.waitForJson('the "mailtally started" log line', (o) => o['msg'] === 'mailtally started', 30_000);
}

function events(): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < SENT + OPENS; i++) {
    const type = i % 2 === 0 ? 'sent' : 'open';
    out.push({ event: type, time: 1_700_000_000 + i, MessageID: (BigInt(BIG_MESSAGE_ID) + BigInt(i)).toString(), email: `k${i}@example.com`, EventID: `k-${i}`, CustomID: `n${i}` });
  }
  return out;
}

/**
 * What a dispatcher just killed may repeat: its outbox rows still claimed, and its Version 1
 * first attempts sent straight from the log without an outcome recorded (events above the
 * low-water checkpoint, up to the fan-out's, with neither an attempt nor an outbox row).
 */
async function claimedRows(t: TestEnv): Promise<number> {
  const r = await t.db.kysely.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<string>().as('n')).where('claim', 'is not', null).executeTakeFirstOrThrow();
  const low = await readCheckpoint(t.db.kysely, FIRST_ATTEMPTS_CHECKPOINT);
  const high = await readCheckpoint(t.db.kysely, WEBHOOKS_CHECKPOINT);
  const open = await sql<{ n: string }>`
    SELECT count(*)::text AS n FROM events e
    WHERE e.position > ${low} AND e.position <= ${high} AND e.type = 'sent'
      AND NOT EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.webhook_id = 'msg_' || e.position)
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = 'msg_' || e.position)`.execute(t.db.kysely);
  return Number(r.n) + Number(open.rows[0]?.n ?? 0);
}

/** CustomIDs that reached `path`, after deduping requests by webhook-id. */
function deliveredEvents(receiver: WebhookReceiver, path: string): string[] {
  const byId = new Map<string, string>();
  for (const r of receiver.at(path)) byId.set(r.webhookId, r.body);
  return [...byId.values()].flatMap((body) => {
    const parsed = JSON.parse(body) as { CustomID: string } | { CustomID: string }[];
    return (Array.isArray(parsed) ? parsed : [parsed]).map((e) => e.CustomID);
  });
}

describe('the dispatcher across crashes', () => {
  it('SIGKILL mid-flight (twice) and restart: every event delivered, none lost, duplicates only of what was in flight', { timeout: 240_000 }, async () => {
    const t = await createTestEnv();
    envs.push(t);
    const receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs: 3 }));
    receivers.push(receiver);
    await createCallbackUrl(t.db.kysely, t.key.APIKeyID, { EventType: 'sent', Url: receiver.url('/v1') });
    await createCallbackUrl(t.db.kysely, t.key.APIKeyID, { EventType: 'open', Url: receiver.url('/v2'), Version: 2 });
    const all = events();
    await append(t.db, t.key.APIKeyID, all.slice(0, 2000));

    const first = startDispatcher(t);
    await started(first);
    await receiver.waitForRequests(300);
    first.signal('SIGKILL');
    expect(await first.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    const afterFirst = receiver.requests.length;
    let claimedAtKills = await claimedRows(t);

    await append(t.db, t.key.APIKeyID, all.slice(2000)); // while no dispatcher runs
    const second = startDispatcher(t);
    await started(second);
    await receiver.waitForRequests(afterFirst + 300);
    second.signal('SIGKILL');
    expect(await second.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    claimedAtKills += await claimedRows(t);
    expect(new Set(deliveredEvents(receiver, '/v1')).size).toBeLessThan(SENT); // the kill landed mid-stream

    const third = startDispatcher(t);
    await started(third);
    await waitFor('every event delivered', async () => new Set([...deliveredEvents(receiver, '/v1'), ...deliveredEvents(receiver, '/v2')]).size === SENT + OPENS, 90_000);
    await waitFor('an empty outbox', async () => {
      const n = await t.db.kysely.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      return Number(n.n) === 0;
    }, 30_000);

    // Deduped by webhook-id, each event exactly once, of the right type at the right URL.
    const v1 = deliveredEvents(receiver, '/v1');
    const v2 = deliveredEvents(receiver, '/v2');
    expect(v1.length).toBe(SENT);
    expect(v2.length).toBe(OPENS);
    expect(new Set(v1)).toEqual(new Set(all.filter((e) => e['event'] === 'sent').map((e) => e['CustomID'])));
    expect(new Set(v2)).toEqual(new Set(all.filter((e) => e['event'] === 'open').map((e) => e['CustomID'])));
    expect(receiver.at('/v1').every((r) => !Array.isArray(JSON.parse(r.body)))).toBe(true);
    expect(receiver.at('/v2').every((r) => Array.isArray(JSON.parse(r.body)))).toBe(true);
    // Duplicates (the same webhook-id twice) are bounded by what the killed processes held
    // claimed: requests in flight, and requests answered whose outcome was not written yet.
    const duplicates = receiver.requests.length - receiver.ids().size;
    expect(duplicates).toBeLessThanOrEqual(claimedAtKills);
    expect(await readCheckpoint(t.db.kysely, WEBHOOKS_CHECKPOINT)).toBe(await logHead(t.db.kysely));

    third.signal('SIGTERM');
    expect(await third.waitForExit(15_000)).toEqual({ code: 0, signal: null });
  });

  it('SIGTERM drains in-flight requests and exits 0; a restart finishes the rest', { timeout: 120_000 }, async () => {
    const t = await createTestEnv();
    envs.push(t);
    const receiver = await WebhookReceiver.start(() => ({ status: 200, delayMs: 200 }));
    receivers.push(receiver);
    await createCallbackUrl(t.db.kysely, t.key.APIKeyID, { EventType: 'sent', Url: receiver.url('/slow') });
    await append(t.db, t.key.APIKeyID, events().filter((e) => e['event'] === 'sent').slice(0, 200));
    const p = startDispatcher(t);
    await started(p);
    await receiver.waitForRequests(20);
    p.signal('SIGTERM');
    expect(await p.waitForExit(15_000)).toEqual({ code: 0, signal: null });
    // Whatever was sent was recorded: no request is repeated by the restart.
    const sentBefore = receiver.requests.length;
    const q = startDispatcher(t);
    await started(q);
    await receiver.waitForIds(200, '/slow', 60_000);
    // A request sent twice is one whose first attempt was recorded as failed (its answer past
    // WEBHOOK_TIMEOUT_MS on a busy machine, then retried), never one the stop left unrecorded.
    const seen = new Map<string, number>();
    for (const r of receiver.requests) seen.set(r.webhookId, (seen.get(r.webhookId) ?? 0) + 1);
    const repeated = [...seen].filter(([, n]) => n > 1).map(([id]) => id);
    const failed = new Set((await t.db.kysely.selectFrom('webhook_attempts').select('webhook_id').where('outcome', '=', 'failed').execute()).map((a) => a.webhook_id));
    expect(repeated.filter((id) => !failed.has(id))).toEqual([]);
    expect(seen.size).toBe(200);
    expect(sentBefore).toBeLessThan(200);
  });
});
