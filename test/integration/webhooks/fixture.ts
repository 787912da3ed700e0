import { connectDb, type Db } from '../../../src/db/connect.js';
import { readCheckpoint } from '../../../src/log/checkpoints.js';
import { logHead } from '../../../src/log/read.js';
import { createCallbackUrl } from '../../../src/webhooks/callback-url-store.js';
import { Dispatcher, type DispatcherOptions } from '../../../src/webhooks/dispatcher.js';
import { WEBHOOKS_CHECKPOINT } from '../../../src/webhooks/fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT } from '../../../src/webhooks/first-attempts-ledger.js';
import { quietLogger, waitFor } from '../../support/harness.js';

/** Dispatcher settings for tests: the loopback receiver allowed, everything fast and small. */
export const FAST: DispatcherOptions = {
  allowList: ['127.0.0.1/32'],
  retryScheduleSeconds: [0.05, 0.05, 0.1],
  timeoutMs: 2000,
  concurrency: 64,
  urlConcurrency: 8,
  adaptiveConcurrency: true,
  retryConcurrency: 16,
  batchWindowMs: 200,
  batchMaxEvents: 100,
  batchMaxBytes: 262_144,
  pollMs: 20,
  leaseMs: 2000,
  fanOutBatchSize: 500,
  attemptsRetentionDays: 30,
};

export async function startDispatcher(db: Db, options: Partial<DispatcherOptions> = {}): Promise<Dispatcher> {
  const d = new Dispatcher(db, { ...FAST, ...options }, quietLogger());
  await d.start();
  return d;
}

/**
 * `count` dispatchers on the Postgres database at `url`, each with a connection pool of its own,
 * as that many processes would be; `stop` stops them and closes their pools.
 */
export async function dispatchersWithOwnPools(
  url: string,
  count: number,
  options: Partial<DispatcherOptions> = {},
): Promise<{ dispatchers: Dispatcher[]; stop: () => Promise<void> }> {
  const pools: Db[] = [];
  const dispatchers: Dispatcher[] = [];
  for (let i = 0; i < count; i++) {
    const own = await connectDb({ kind: 'postgres', url, poolSize: 4 });
    pools.push(own);
    dispatchers.push(await startDispatcher(own, options));
  }
  return {
    dispatchers,
    stop: async () => {
      for (const d of dispatchers) await d.stop();
      for (const p of pools) await p.close();
    },
  };
}

/** Creates a callback URL and returns its id and signing secret. */
export async function hook(
  db: Db,
  tenant: string,
  body: Record<string, unknown>,
): Promise<{ id: bigint; secret: string }> {
  const { callbackUrl, secret } = await createCallbackUrl(db.kysely, tenant, body);
  return { id: callbackUrl.id, secret };
}

/** Waits until the dispatcher has read the whole log and its outbox is empty (all delivered, expired or dropped). */
export async function outboxEmpty(db: Db, timeoutMs = 30_000): Promise<void> {
  const head = await logHead(db.kysely);
  await waitFor(
    'the webhooks checkpoints at the log head (every first attempt recorded) and an empty outbox',
    async () => {
      if ((await readCheckpoint(db.kysely, WEBHOOKS_CHECKPOINT)) < head) return false;
      if ((await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT)) < head) return false;
      const r = await db.kysely.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      return Number(r.n) === 0;
    },
    timeoutMs,
  );
}

export async function urlStatus(db: Db, id: bigint): Promise<string | undefined> {
  return (await db.kysely.selectFrom('callback_urls').select('status').where('id', '=', id).executeTakeFirst())?.status;
}
