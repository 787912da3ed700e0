import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/keys/key-store.js';
import { type TestEnv, countRows, createTestEnv, waitFor } from '../support/harness.js';
import { type JetStreamHandle, deleteStreamQuietly, openJetStream, publishAll } from '../support/jetstream.js';
import { spawnCli, stopAll } from '../support/processes.js';

/**
 * A key created while NATS ingest runs: its events are a valid tenant's events and must reach
 * the log, however soon after the key's creation they are published (the service should not
 * dead-letter them as "unknown APIKeyID" because its tenant cache was refreshed a moment ago).
 */

let t: TestEnv | undefined;
let h: JetStreamHandle | undefined;

afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  await h?.close().catch(() => {});
  if (t !== undefined) {
    await deleteStreamQuietly(t.env['NATS_URL'] as string, t.env['NATS_STREAM'] as string);
    await t.cleanup();
  }
});

const open = (n: number) => JSON.stringify({ event: 'open', time: 1_600_000_000 + n, MessageID: n, email: `n${n}@example.com`, EventID: `nk-${n}` });

describe('NATS ingest and a key created a moment ago', () => {
  it('stores the new key\'s events instead of dead-lettering them', { timeout: 60_000 }, async () => {
    const env = await createTestEnv();
    t = env;
    h = await openJetStream(env.env['NATS_URL'] as string);
    const ingest = spawnCli(['serve', '--roles', 'ingest'], { env: { ...env.env, LOG_LEVEL: 'info' } });
    await ingest.serverUrl();

    // An event for the existing key: ingest loads its list of tenants.
    await publishAll(h, [{ subject: env.subject(env.key.APIKeyID, 'open'), body: open(1), msgId: 'nk-1' }]);
    await waitFor('the first event in the log', async () => (await countRows(env.db, 'events')) === 1);

    // A key made right after, used at once (as `keys create` followed by a producer would).
    const fresh = await createApiKey(env.db.kysely);
    await publishAll(h, [{ subject: env.subject(fresh.APIKeyID, 'open'), body: open(2), msgId: 'nk-2' }]);
    await waitFor(
      'the second event to be stored or dead-lettered',
      async () => (await countRows(env.db, 'events')) + (await countRows(env.db, 'dead_letters')) >= 2,
    );

    const letters = await env.db.kysely.selectFrom('dead_letters').select(['reason']).execute();
    expect(letters).toEqual([]);
    const stored = await env.db.kysely.selectFrom('events').select(['event_id', 'api_key_id']).orderBy('position').execute();
    expect(stored).toEqual([
      { event_id: 'nk-1', api_key_id: BigInt(env.key.APIKeyID) },
      { event_id: 'nk-2', api_key_id: BigInt(fresh.APIKeyID) },
    ]);
  });
});
