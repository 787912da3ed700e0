import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NatsIngest, type NatsIngestOptions } from '../../src/ingest/nats-ingest.js';
import { ensureStream } from '../../src/ingest/nats-stream.js';
import { TenantDirectory } from '../../src/ingest/tenants.js';
import { type TestEnv, countRows, createTestEnv, quietLogger, waitFor } from '../support/harness.js';
import { openJetStream } from '../support/jetstream.js';
import { PrivateNats } from '../support/private-nats.js';
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

  it('writes a backlog of large events in transactions bounded in bytes', { timeout: 60_000 }, async () => {
    // 60 events of about 300 kB: 18 MB, well within the count bounds (batches of 100).
    const size = 300_000;
    const ingest = await startIngest({ maxAckPending: 100_000, maxHeld: 500, batchBytes: 1_000_000, maxBatchBytes: 2_000_000 });
    const lock = await lockEvents();
    try {
      const acks = [];
      for (let i = 0; i < 60; i++) {
        const text = `{"event":"open","time":${1_700_000_000 + i},"MessageID":${20_000 + i},"email":"big${i}@example.com","EventID":"big-${i}","note":"${'x'.repeat(size)}"}`;
        acks.push(js.publish(t.subject(t.key.APIKeyID, 'open'), text));
      }
      await Promise.all(acks);
      // Every write waits behind the lock while the batches queue up.
      await waitFor('the events taken', async () => ingest.stats.received === 60);
    } finally {
      await lock.release();
    }
    await waitFor('every large event stored', async () => (await storedWithTag('big')) === 60, 30_000);
    // One transaction per write: a sealed batch stops at the message that reaches 1 MB (4 of
    // these), and queued batches join only within 2 MB (6 of these).
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM events WHERE event_id LIKE 'big-%' GROUP BY xmin::text`.execute(t.db.kysely);
    expect(Math.max(...rows.map((r) => r.n))).toBeLessThanOrEqual(6);
    expect(rows.reduce((n, r) => n + r.n, 0)).toBe(60);
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
    expect(await countRows(t.db, 'events')).toBe(2110);
  });
});

describe('NATS ingest when its stream goes away', () => {
  it('notices the stream and consumer deleted, recreates them, and stores what is published after', { timeout: 90_000 }, async () => {
    const ingest = await startIngest();
    await publishEvents(3, 'before-delete');
    await waitFor('the first events stored', async () => (await storedWithTag('before-delete')) === 3);

    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(options().stream);
    // A producer recreates the stream as it would find it missing (the ingest may have done so first).
    await ensureStream(jsm, options());
    await publishEvents(5, 'after-delete');
    await waitFor('the events published after the deletion stored', async () => (await storedWithTag('after-delete')) === 5, 45_000, 200);
    expect(ingest.consuming).toBe(true);
    const info = await jsm.consumers.info(options().stream, options().consumer);
    expect(info.num_ack_pending + info.num_pending).toBe(0);
  });
});

describe('NATS ingest when NATS restarts without its store', () => {
  it('recreates the stream and consumer on reconnect and stores what is published after', { timeout: 90_000 }, async () => {
    const server = await PrivateNats.create();
    const own = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    const ingest = new NatsIngest(own, t.db, new TenantDirectory(t.db.kysely), options(), quietLogger());
    try {
      await ingest.start();
      const publishTo = async (tag: string) => {
        const h = await openJetStream(server.url);
        try {
          await ensureStream(h.jsm, options());
          for (let i = 0; i < 4; i++) {
            await h.js.publish(t.subject(t.key.APIKeyID, 'open'), `{"event":"open","time":${1_700_000_000 + i},"MessageID":${20_000 + i},"email":"w${i}@example.com","EventID":"${tag}-${i}"}`);
          }
        } finally {
          await h.close();
        }
      };
      await publishTo('before-wipe');
      await waitFor('the first events stored', async () => (await storedWithTag('before-wipe')) === 4);
      await server.kill();
      rmSync(join(server.dir, 'store'), { recursive: true, force: true });
      await server.start();
      await publishTo('after-wipe');
      await waitFor('the events published after the restart stored', async () => (await storedWithTag('after-wipe')) === 4, 60_000, 200);
      expect(ingest.consuming).toBe(true);
    } finally {
      await ingest.stop();
      await own.close();
      await server.destroy();
    }
  });
});
