import type { Config } from '../config.js';
import type { Db } from '../db/connect.js';
import type { Logger } from '../logger.js';
import { connectNats } from './nats-connect.js';
import { type ConsumerBacklog, type IngestStats, NatsIngest, type NatsIngestOptions } from './nats-ingest.js';
import { TenantDirectory } from './tenants.js';

/**
 * The ingest settings from the configuration: a pipeline of two batches per worker; a backlog in
 * up to four batches at once (in messages and in bytes); at most eight batches of messages held.
 */
function natsIngestOptions(config: Config): NatsIngestOptions {
  if (config.nats === null) throw new Error('NATS is not configured');
  return {
    stream: config.nats.stream,
    subjectPrefix: config.nats.subjectPrefix,
    consumer: config.nats.consumer,
    ackWaitMs: config.ingest.ackWaitMs,
    maxAckPending: config.ingest.batchSize * 8 * config.ingest.workers,
    batchSize: config.ingest.batchSize,
    batchBytes: config.ingest.batchBytes,
    batchWaitMs: config.ingest.batchWaitMs,
    pipeline: 2,
    maxBatchRows: config.ingest.batchSize * 4,
    maxBatchBytes: config.ingest.batchBytes * 4,
  };
}

/** A started ingest: its counters, and a stop that drains it. */
export interface RunningIngest {
  readonly stats: IngestStats;
  /** False while the NATS consumer cannot be read (e.g. its stream was deleted and is being recreated). */
  readonly consuming: boolean;
  /** The durable consumer's backlog as NATS last reported it; null while it is not read. */
  readonly backlog: ConsumerBacklog | null;
  stop(): Promise<void>;
}

/** Connects to NATS and runs one NatsIngest in this thread; stop() drains it, then the connection. */
export async function runNatsIngest(config: Config, db: Db, log: Logger, name: string): Promise<RunningIngest> {
  const nc = await connectNats({ servers: [...(config.nats?.servers ?? [])], name, maxReconnectAttempts: -1, reconnectTimeWait: 1000 });
  const ingest = new NatsIngest(nc, db, new TenantDirectory(db.kysely), natsIngestOptions(config), log);
  try {
    await ingest.start();
  } catch (err) {
    await nc.close();
    throw err;
  }
  // While the connection is down (the client reconnects every second, for ever), nothing is
  // consumed: said once in the log, and in `consuming` (/status, /metrics).
  let connected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' && connected) {
        connected = false;
        log.warn({ server: s.server }, 'NATS connection lost: ingest paused, reconnecting every second (events published meanwhile wait in the stream)');
      } else if (s.type === 'reconnect' && !connected) {
        connected = true;
        log.info({ server: s.server }, 'NATS connection back: ingest resumes');
      }
    }
  })();
  return {
    get stats() {
      return ingest.stats;
    },
    get consuming() {
      return connected && ingest.consuming;
    },
    get backlog() {
      return connected ? ingest.backlog : null;
    },
    stop: async () => {
      await ingest.stop();
      // A drain needs the server: while the connection is down it fails at once, and the
      // connection, left reconnecting, would hold the process for ever. Closed instead: what was
      // not acked is redelivered.
      await nc.drain().catch(() => nc.close());
    },
  };
}
