import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { emptyStats } from '../../../src/webhooks/dispatcher-stats.js';
import type { HttpOutcome } from '../../../src/webhooks/http-delivery.js';
import { type ClaimedDelivery, claimDue, insertDeliveries } from '../../../src/webhooks/outbox.js';
import { OutcomeWriter } from '../../../src/webhooks/outcome-writer.js';
import { openMigratedDb } from '../../support/databases.js';
import { quietLogger } from '../../support/harness.js';
import { hook, urlStatus } from './fixture.js';

/**
 * The outcome writer acts only on rows whose claim it still holds: a worker whose lease ran out
 * while its request was in flight (frozen, or waiting out a database outage) records its attempt
 * as what it was, and leaves the decisions — expiring the delivery, killing the URL — to the
 * row's new holder.
 */

const SCHEDULE = [0.05];
const FAILED: HttpOutcome = { ok: false, statusCode: 500, latencyMs: 3, errorClass: 'http_status', snippet: null, retryAfterMs: null };

let db: Db;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
});
afterAll(async () => {
  await cleanup?.();
});

/** One delivery to a fresh URL, claimed by `claim`, already at its last retry. */
async function lastTry(tenant: string, claim: string): Promise<ClaimedDelivery> {
  const url = await hook(db, tenant, { EventType: 'sent', Url: `http://127.0.0.1:9/hook/${tenant}` });
  await insertDeliveries(db.kysely, [{ apiKeyId: BigInt(tenant), urlId: url.id, webhookId: `msg_${tenant}`, events: ['{"event":"sent"}'], positions: [1n], bytes: 16, delayMs: 0 }]);
  await db.kysely.updateTable('webhook_deliveries').set({ attempts: SCHEDULE.length }).where('url_id', '=', url.id).execute();
  const [row] = await claimDue(db.kysely, { retry: false, limit: 10, perUrl: 10, room: new Map(), after: url.id - 1n, leaseMs: 1, claim });
  if (row === undefined || row.urlId !== url.id) throw new Error('the delivery was not claimed');
  return row;
}

async function write(delivery: ClaimedDelivery) {
  const stats = emptyStats({ held: false, position: '0', batches: 0, eventsRead: 0, eventsEnqueued: 0, deliveriesEnqueued: 0, recovered: 0, paced: 0, errors: 0 });
  const writer = new OutcomeWriter(db.kysely, { retryScheduleSeconds: SCHEDULE, maxBatch: 10, lingerMs: 1 }, stats, quietLogger(), () => undefined);
  await writer.write([{ delivery, http: FAILED, attemptedAt: new Date(Date.now() - 1000) }]);
  const attempts = await db.kysely.selectFrom('webhook_attempts').select(['outcome']).where('url_id', '=', delivery.urlId).execute();
  const pending = await db.kysely.selectFrom('webhook_deliveries').select(['claim']).where('id', '=', delivery.id).execute();
  return { stats, outcomes: attempts.map((a) => a.outcome), pending: pending.map((p) => p.claim), status: await urlStatus(db, delivery.urlId) };
}

describe('webhook outcomes and claims', () => {
  it('the claim holder out of retries kills a URL that never worked (its row goes to the reroute)', async () => {
    const r = await write(await lastTry('41', 'worker-a'));
    expect(r.outcomes).toEqual(['failed']);
    expect(r.pending).toEqual([null]);
    expect(r.status).toBe('dead');
    expect(r.stats.urlsDied).toBe(1);
  });

  it('the claim holder out of retries expires the delivery alone when its URL worked since', async () => {
    const d = await lastTry('43', 'worker-a');
    await db.kysely.updateTable('callback_urls').set({ last_success_at: new Date() }).where('id', '=', d.urlId).execute();
    const r = await write(d);
    expect(r.outcomes).toEqual(['expired']);
    expect(r.pending).toEqual([]);
    expect(r.status).toBe('alive');
    expect(r.stats.expired).toBe(1);
  });

  it('a worker whose claim was taken over records a failed attempt and changes nothing else', async () => {
    const stale = await lastTry('42', 'worker-a');
    // Its lease ran out and another worker claimed the row.
    await db.kysely.updateTable('webhook_deliveries').set({ claim: 'worker-b' }).where('id', '=', stale.id).execute();
    const r = await write(stale);
    expect(r.outcomes).toEqual(['failed']);
    expect(r.pending).toEqual(['worker-b']);
    expect(r.status).toBe('alive');
    expect(r.stats.expired + r.stats.urlsDied).toBe(0);
    expect(r.stats.failedAttempts).toBe(1);
  });
});
