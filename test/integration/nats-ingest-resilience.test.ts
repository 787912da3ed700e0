import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NatsIngest, type NatsIngestOptions } from '../../src/ingest/nats-ingest.js';
import { TenantDirectory } from '../../src/ingest/tenants.js';
import { type TestEnv, countRows, createTestEnv, quietLogger, waitFor } from '../support/harness.js';
import { NATS_URL } from '../support/services.js';

/** NATS ingest when Postgres hangs, when it is stopped meanwhile, and when its stream goes away. */

let t: TestEnv;
let nc: NatsConnection;
let js: JetStreamClient;
const running: NatsIngest[] = [];

function options(extra: Partial<NatsIngestOptions> = {}): NatsIngestOptions {
  const nats = t.config.nats;
  if (nats === null) throw new Error('test env has no NATS');
  return { stream: nats.stream, subjectPrefix: nats.subjectPrefix, consumer: nats.consumer, ackWaitMs: 3000, maxAckPending: 4000, batchSize: 100, batchWaitMs: 5, pipeline: 2, ...extra };
}

async function startIngest(extra: Partial<NatsIngestOptions> = {}): Promise<NatsIngest> {
  const ingest = new NatsIngest(nc, t.db, new TenantDirectory(t.db.kysely), options(extra), quietLogger());
  await ingest.start();
  running.push(ingest);
  return ingest;
}

async function publishEvents(n: number, tag: string): Promise<void> {
  const acks = [];
  for (let i = 0; i < n; i++) {
    const text = `{"event":"open","time":${1_700_000_000 + i},"MessageID":${10_000 + i},"email":"u${i}@example.com","EventID":"${tag}-${i}"}`;
    acks.push(js.publish(t.subject(t.key.APIKeyID, 'open'), text));
  }
  await Promise.all(acks);
}

/** Holds an ACCESS EXCLUSIVE lock on `events` (every append waits) until release() is called. */
async function lockEvents(): Promise<{ release: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
  return {
    release: async () => {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

const storedWithTag = async (tag: string) =>
  Number((await t.db.kysely.selectFrom('events').select((eb) => eb.fn.countAll<string>().as('n')).where('event_id', 'like', `${tag}-%`).executeTakeFirstOrThrow()).n);

beforeAll(async () => {
  t = await createTestEnv();
  nc = await connect({ servers: NATS_URL });
  js = jetstream(nc);
});

afterEach(async () => {
  for (const ingest of running.splice(0)) await ingest.stop();
});

afterAll(async () => {
  await nc.close();
  await t.cleanup();
});

describe('NATS ingest while Postgres hangs', () => {
  it('holds each message once, at most maxHeld, and keeps them from redelivery past ack_wait', { timeout: 60_000 }, async () => {
    const ingest = await startIngest({ ackWaitMs: 1000, maxAckPending: 100_000, maxHeld: 500 });
    const lock = await lockEvents();
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, ingest.held)), 10);
    try {
      await publishEvents(2000, 'hang');
      // Six ack_waits with every write stuck behind the lock.
      await new Promise((r) => setTimeout(r, 6000));
      expect(ingest.stats.stored).toBe(0);
    } finally {
      await lock.release();
    }
    await waitFor('every event stored', async () => (await storedWithTag('hang')) === 2000, 30_000);
    clearInterval(sampler);
    expect(ingest.stats.failedBatches).toBe(0);
    // Each message was taken once: no redelivered copy was queued and written again.
    expect({ received: ingest.stats.received, duplicates: ingest.stats.duplicates }).toEqual({ received: 2000, duplicates: 0 });
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(500);
  });

  it('stop() returns while a write hangs, and the unacked events are stored by the next ingest', { timeout: 60_000 }, async () => {
    const first = await startIngest({ stopTimeoutMs: 1000 });
    const lock = await lockEvents();
    try {
      await publishEvents(50, 'stop');
      await waitFor('the events taken', async () => first.stats.received === 50);
      const outcome = await Promise.race([first.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still stopping'), 15_000))]);
      expect(outcome).toBe('stopped');
    } finally {
      await lock.release();
    }
    await startIngest();
    await waitFor('every event stored once', async () => (await storedWithTag('stop')) === 50, 30_000);
    expect(await countRows(t.db, 'events')).toBe(2050);
  });
});
