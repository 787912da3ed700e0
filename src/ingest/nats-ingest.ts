import { type Consumer, type ConsumerMessages, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import { describeError } from '../db/errors.js';
import type { Config } from '../config.js';
import type { Db } from '../db/connect.js';
import type { NewDeadLetter } from '../db/schema.js';
import { type LogEventRow, decodeEventBytes } from '../events/decode.js';
import type { Logger } from '../logger.js';
import { writeBatch } from './batch-writer.js';
import { type ConsumerSettings, ensureStreamAndConsumer } from './nats-stream.js';
import { type ParsedSubject, parseSubject } from './subject.js';
import { TenantDirectory } from './tenants.js';

export interface NatsIngestOptions extends ConsumerSettings {
  batchSize: number;
  batchWaitMs: number;
  /** Batches written at once; commits still serialize on the log's append lock. */
  pipeline: number;
}

export interface IngestStats {
  received: number;
  stored: number;
  duplicates: number;
  deadLettered: number;
  failedBatches: number;
}

/**
 * The NATS ingest loop: a durable pull consumer, messages gathered into batches (up to
 * `batchSize` or `batchWaitMs` after the first), each batch decoded, written in one transaction,
 * and only then acked. Poison messages are dead-lettered and termed; when Postgres is away the
 * batch is nak'ed with a growing delay and the stream keeps the events until it is back.
 * Several processes may run this against the same consumer.
 */
export class NatsIngest {
  readonly stats: IngestStats = { received: 0, stored: 0, duplicates: 0, deadLettered: 0, failedBatches: 0 };
  #messages: ConsumerMessages | null = null;
  #pending: JsMsg[] = [];
  #timer: NodeJS.Timeout | null = null;
  #inFlight = new Set<Promise<void>>();
  #stopping = false;
  #loop: Promise<void> | null = null;
  #consecutiveFailures = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly db: Db,
    private readonly tenants: TenantDirectory,
    private readonly opts: NatsIngestOptions,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await ensureStreamAndConsumer(await jetstreamManager(this.nc), this.opts);
    const consumer = await jetstream(this.nc).consumers.get(this.opts.stream, this.opts.consumer);
    this.#loop = this.#run(consumer);
  }

  /** Stops pulling, writes and acks what was already received, waits for in-flight batches. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#messages?.close();
    await this.#loop;
    await this.#flush();
    await Promise.all(this.#inFlight);
  }

  async #run(consumer: Consumer): Promise<void> {
    while (!this.#stopping) {
      try {
        this.#messages = await consumer.consume({ max_messages: this.opts.batchSize * 2 });
        for await (const m of this.#messages) {
          this.#pending.push(m);
          if (this.#pending.length >= this.opts.batchSize) await this.#flush();
          else this.#timer ??= setTimeout(() => void this.#flush(), this.opts.batchWaitMs);
        }
      } catch (err) {
        if (this.#stopping) break;
        this.log.warn({ err: describeError(err) }, 'NATS consume failed; retrying');
        await sleep(1000);
      }
    }
  }

  /** Hands the pending messages to a writer, waiting for a free pipeline slot first. */
  async #flush(): Promise<void> {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    while (this.#inFlight.size >= this.opts.pipeline) await Promise.race(this.#inFlight);
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const job = this.#process(batch).finally(() => this.#inFlight.delete(job));
    this.#inFlight.add(job);
  }

  async #process(batch: JsMsg[]): Promise<void> {
    try {
      const subjects = batch.map((m) => parseSubject(m.subject, this.opts.subjectPrefix));
      await this.tenants.ensureLoaded(subjects.flatMap((s) => (s.ok ? [s.apiKeyId] : [])));
      const rows: LogEventRow[] = [];
      const rowMessages: JsMsg[] = [];
      const rowSubjects: ParsedSubject[] = [];
      const letters: NewDeadLetter[] = [];
      const poison: JsMsg[] = [];
      for (const [i, m] of batch.entries()) {
        const subject = subjects[i] as ParsedSubject;
        const reason = this.#decode(m, subject, rows);
        if (reason === null) {
          rowMessages.push(m);
          rowSubjects.push(subject);
        } else {
          letters.push(natsDeadLetter(m, reason, subject));
          poison.push(m);
        }
      }
      this.stats.received += batch.length;
      const outcome = await writeBatch(this.db, rows, letters, (i, reason) =>
        natsDeadLetter(rowMessages[i] as JsMsg, reason, rowSubjects[i] as ParsedSubject),
      );
      this.#consecutiveFailures = 0;
      this.stats.stored += outcome.inserted.size;
      this.stats.duplicates += rows.length - outcome.inserted.size - outcome.refused.size;
      this.stats.deadLettered += letters.length + outcome.refused.size;
      for (const [i, m] of rowMessages.entries()) {
        if (outcome.refused.has(i)) m.term();
        else m.ack();
      }
      for (const m of poison) m.term();
    } catch (err) {
      // Transient: leave the events in the stream and try again later, backing off.
      this.#consecutiveFailures++;
      this.stats.failedBatches++;
      const delay = Math.min(100 * 2 ** this.#consecutiveFailures, 10_000);
      this.log.warn({ err: describeError(err), messages: batch.length, retryInMs: delay }, 'ingest batch not stored; will retry');
      for (const m of batch) m.nak(delay);
    }
  }

  /** Decodes one message into `rows`; returns the reason when it must be dead-lettered. */
  #decode(m: JsMsg, subject: ParsedSubject, rows: LogEventRow[]): string | null {
    if (!subject.ok) return subject.reason;
    if (!this.tenants.knows(subject.apiKeyId)) return `unknown APIKeyID ${subject.apiKeyId} in subject ${m.subject}`;
    try {
      const decoded = decodeEventBytes(m.data, { apiKeyId: subject.apiKeyId, subjectEvent: subject.event, natsSeq: m.seq });
      if (!decoded.ok) return decoded.reason;
      rows.push(decoded.row);
      return null;
    } catch (err) {
      return `could not be decoded: ${describeError(err)}`;
    }
  }
}

function natsDeadLetter(m: JsMsg, reason: string, subject: ParsedSubject): NewDeadLetter {
  const apiKeyId = subject.ok ? subject.apiKeyId : null;
  return {
    source: 'nats',
    subject: m.subject,
    nats_seq: m.seq,
    message_key: `${m.info.stream}/${m.seq}/${m.info.timestampNanos}`,
    api_key_id: apiKeyId,
    reason,
    raw: Buffer.from(m.data),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The ingest settings from the configuration (a pipeline of two batches per worker). */
export function natsIngestOptions(config: Config): NatsIngestOptions {
  if (config.nats === null) throw new Error('NATS is not configured');
  return {
    stream: config.nats.stream,
    subjectPrefix: config.nats.subjectPrefix,
    consumer: config.nats.consumer,
    ackWaitMs: config.ingest.ackWaitMs,
    maxAckPending: config.ingest.batchSize * 8 * config.ingest.workers,
    batchSize: config.ingest.batchSize,
    batchWaitMs: config.ingest.batchWaitMs,
    pipeline: 2,
  };
}

/** A started ingest: its counters, and a stop that drains it. */
export interface RunningIngest {
  readonly stats: IngestStats;
  stop(): Promise<void>;
}

/** Connects to NATS and runs one NatsIngest in this thread; stop() drains it, then the connection. */
export async function runNatsIngest(config: Config, db: Db, log: Logger, name: string): Promise<RunningIngest> {
  const nc = await connect({ servers: [...(config.nats?.servers ?? [])], name, maxReconnectAttempts: -1, reconnectTimeWait: 1000 });
  const ingest = new NatsIngest(nc, db, new TenantDirectory(db.kysely), natsIngestOptions(config), log);
  try {
    await ingest.start();
  } catch (err) {
    await nc.close();
    throw err;
  }
  return {
    get stats() {
      return ingest.stats;
    },
    stop: async () => {
      await ingest.stop();
      await nc.drain();
    },
  };
}
