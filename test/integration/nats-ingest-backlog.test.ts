import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsIngest } from '../../src/ingest/nats-ingest.js';
import { TenantDirectory } from '../../src/ingest/tenants.js';
import { type TestEnv, createTestEnv, quietLogger, waitFor } from '../support/harness.js';
import { NATS_URL } from '../support/services.js';

/**
 * The NATS consumer's backlog as ingest reads it (for /status and /metrics): messages waiting
 * in the stream and messages held unacked, followed down to zero once they are stored.
 */

let t: TestEnv;
let nc: NatsConnection;
let js: JetStreamClient;

beforeAll(async () => {
  t = await createTestEnv();
  nc = await connect({ servers: NATS_URL });
  js = jetstream(nc);
});

afterAll(async () => {
  await nc?.close();
  await t?.cleanup();
});

describe('the NATS consumer backlog', () => {
  it('counts messages not yet delivered and delivered unacked, while appends wait, then none', { timeout: 60_000 }, async () => {
    const nats = t.config.nats;
    if (nats === null) throw new Error('test env has no NATS');
    const ingest = new NatsIngest(
      nc,
      t.db,
      new TenantDirectory(t.db.kysely),
      { stream: nats.stream, subjectPrefix: nats.subjectPrefix, consumer: nats.consumer, ackWaitMs: 3000, maxAckPending: 10, batchSize: 5, batchWaitMs: 5, pipeline: 2, backlogSampleMs: 50 },
      quietLogger(),
    );
    await ingest.start();
    try {
      await waitFor('a first reading', async () => ingest.backlog !== null);
      expect(ingest.backlog).toEqual({ pending: 0, ackPending: 0 });

      // Every append waits behind this lock: the ingest holds what NATS lets it (10), the rest waits in the stream.
      const locker = new pg.Client({ connectionString: t.env['DATABASE_URL'] });
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
      try {
        const acks = [];
        for (let i = 0; i < 30; i++) {
          acks.push(js.publish(t.subject(t.key.APIKeyID, 'open'), `{"event":"open","time":${1_700_000_000 + i},"MessageID":${500 + i},"email":"b${i}@example.com","EventID":"backlog-${i}"}`));
        }
        await Promise.all(acks);
        await waitFor('the backlog read while appends wait', async () => ingest.backlog?.pending === 20 && ingest.backlog.ackPending === 10);
      } finally {
        await locker.query('COMMIT');
        await locker.end();
      }
      await waitFor('the backlog gone once stored', async () => ingest.backlog?.pending === 0 && ingest.backlog.ackPending === 0, 20_000);
      expect(ingest.stats.stored).toBe(30);
    } finally {
      await ingest.stop();
    }
    // Stopped: no reading is given rather than the last one.
    expect(ingest.backlog).toBeNull();
  });
});
