import { jetstream } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IngestWorkers } from '../../src/ingest/ingest-workers.js';
import { type TestEnv, countRows, createTestEnv, quietLogger, waitFor } from '../support/harness.js';
import { NATS_URL } from '../support/services.js';

/** INGEST_WORKERS > 1: a worker thread that dies is started again, and no event is lost. */

let t: TestEnv;
let nc: NatsConnection;
let workers: IngestWorkers | null = null;

beforeAll(async () => {
  t = await createTestEnv();
  nc = await connect({ servers: NATS_URL });
});

afterAll(async () => {
  await workers?.stop();
  await nc.close();
  await t.cleanup();
});

async function publish(n: number, tag: string): Promise<void> {
  const js = jetstream(nc);
  const acks = [];
  for (let i = 0; i < n; i++) {
    acks.push(js.publish(t.subject(t.key.APIKeyID, 'open'), `{"event":"open","time":${1_700_000_000 + i},"MessageID":${30_000 + i},"email":"w${i}@example.com","EventID":"${tag}-${i}"}`));
  }
  await Promise.all(acks);
}

describe('ingest worker threads', () => {
  it('start a worker that died again; its counters stay in the totals and every event is stored once', { timeout: 90_000 }, async () => {
    workers = new IngestWorkers(t.config, 2, quietLogger());
    await workers.start();
    await publish(500, 'before');
    await waitFor('the first events stored', async () => (await countRows(t.db, 'events')) === 500, 30_000);
    await waitFor('the workers to report them', async () => workers?.stats.stored === 500, 10_000);

    const [first] = workers.threads;
    await first?.terminate();
    await waitFor('the dead worker noticed', async () => workers?.consuming === false, 5000);
    // The totals do not go back when a worker's counters are retired.
    expect(workers.stats.stored).toBe(500);
    await publish(500, 'after');

    await waitFor('the worker started again', async () => workers?.restarts === 1 && workers.consuming, 20_000);
    expect(workers.threads[0]).not.toBe(first);
    await waitFor('every event stored', async () => (await countRows(t.db, 'events')) === 1000, 30_000);
    await waitFor('the totals to count them once', async () => workers?.stats.stored === 1000, 10_000);
    expect(workers.stats.duplicates).toBe(0);
    // The shared consumer's backlog, as a worker read it from NATS (every 2 s) and reported it.
    await waitFor('the backlog reported empty', async () => workers?.backlog?.pending === 0 && workers.backlog.ackPending === 0, 10_000);
    await workers.stop();
    workers = null;
  });
});
