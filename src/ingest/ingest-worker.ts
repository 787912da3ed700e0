import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { createLogger } from '../logger.js';
import { runNatsIngest } from './run-nats-ingest.js';

/**
 * One ingest worker thread: its own NATS connection, its own Postgres pool, one NatsIngest on
 * the shared durable consumer. Reports its counters every second; drains and exits on 'stop'.
 */
const { config, index } = workerData as { config: Config; index: number };
const port = parentPort;
if (port === null || config.nats === null) throw new Error('ingest-worker must run as a worker thread with NATS configured');

const log = createLogger(config.logLevel).child({ role: 'ingest', worker: index });
const db = await connectDb({ ...config.database, ...(config.database.kind === 'postgres' ? { poolSize: 4 } : {}) }, { application: `mailtally:ingest-${index}` });
const ingest = await runNatsIngest(config, db, log, `mailtally-ingest-${index}`);
const report = setInterval(() => port.postMessage({ type: 'stats', stats: ingest.stats, consuming: ingest.consuming, backlog: ingest.backlog }), 1000);
port.postMessage({ type: 'started' });

port.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  clearInterval(report);
  void (async () => {
    await ingest.stop();
    await db.close();
    port.postMessage({ type: 'stopped', stats: ingest.stats });
    port.close();
  })();
});
