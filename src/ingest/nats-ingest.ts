import { type Consumer, type ConsumerMessages, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { describeError } from '../db/errors.js';
import type { Db } from '../db/connect.js';
import type { LogEventRow } from '../events/decode.js';
import { type Logger, LogThrottle } from '../logger.js';
import { writeBatch } from './batch-writer.js';
import { HeldMessages } from './held-messages.js';
import { IngestBatch } from './ingest-batch.js';
import { natsDeadLetter } from './nats-message.js';
import { type ConsumerSettings, DUPLICATE_WINDOW_MS, ensureStreamAndConsumer } from './nats-stream.js';
import { SubjectParser } from './subject.js';
import type { TenantDirectory } from './tenants.js';

export interface NatsIngestOptions extends ConsumerSettings {
  batchSize: number;
  batchWaitMs: number;
  /** Batches written at once; commits still serialize on the log's append lock. */
  pipeline: number;
  /** Queued batches are written together up to this many messages (default `batchSize`: never merged). */
  maxBatchRows?: number;
  /** Messages held (received, not yet acked) at most; past it pulling stops (default `maxAckPending`). */
  maxHeld?: number;
  /** A batch is sealed once its messages reach this many bytes, as at `batchSize` messages (default: no bound). */
  batchBytes?: number;
  /** Queued batches are written together up to this many bytes (default `batchBytes`). */
  maxBatchBytes?: number;
  /** How long stop() waits for batches being written (default 10 s); their messages are redelivered. */
  stopTimeoutMs?: number;
  /** How often the consumer's backlog is read from NATS (default BACKLOG_SAMPLE_MS). */
  backlogSampleMs?: number;
}

/** The durable consumer's backlog as NATS last reported it. */
export interface ConsumerBacklog {
  /** Messages in the stream not yet delivered to the consumer. */
  readonly pending: number;
  /** Messages delivered and not yet acked (held by ingest processes, or waiting for redelivery). */
  readonly ackPending: number;
}

/** The consumer's backlog is asked of NATS this often (one small request). */
const BACKLOG_SAMPLE_MS = 2000;

export interface IngestStats {
  received: number;
  stored: number;
  duplicates: number;
  deadLettered: number;
  failedBatches: number;
  /** Redelivered copies of messages this ingest still held, not taken again. */
  redeliveriesSkipped: number;
}

/**
 * The NATS ingest loop: a durable pull consumer whose messages are decoded as they arrive and
 * gathered into batches (up to `batchSize` or `batchBytes`, or `batchWaitMs` after the first); each batch is
 * written in one transaction and only then acked. While the writers are busy, sealed batches
 * queue up, and a free writer takes several of them at once (up to `maxBatchRows`): a backlog is
 * written in larger transactions. Poison messages are dead-lettered and termed; when Postgres is
 * away the batch is nak'ed with a growing delay and the stream keeps the events until it is back.
 * Several processes may run this against the same consumer (each message is acked on its own).
 */
export class NatsIngest {
  readonly stats: IngestStats = { received: 0, stored: 0, duplicates: 0, deadLettered: 0, failedBatches: 0, redeliveriesSkipped: 0 };
  readonly #subjects: SubjectParser;
  readonly #maxBatchRows: number;
  readonly #batchBytes: number;
  readonly #maxBatchBytes: number;
  readonly #held: HeldMessages;
  #touch: NodeJS.Timeout | null = null;
  #sampler: NodeJS.Timeout | null = null;
  #consumer: Consumer | null = null;
  #backlog: ConsumerBacklog | null = null;
  #messages: ConsumerMessages | null = null;
  #batch = new IngestBatch();
  #queue: IngestBatch[] = [];
  #timer: NodeJS.Timeout | null = null;
  #inFlight = new Set<Promise<void>>();
  #stopping = false;
  #consuming = false;
  readonly #failureLog = new LogThrottle(10_000);
  #consumerCreated: string | null = null;
  /** The stream's long Nats-Msg-Id window told once per process, not at each reconnect. */
  #warnedWindow = false;
  #loop: Promise<void> | null = null;
  #consecutiveFailures = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly db: Db,
    private readonly tenants: TenantDirectory,
    private readonly opts: NatsIngestOptions,
    private readonly log: Logger,
  ) {
    this.#subjects = new SubjectParser(opts.subjectPrefix);
    this.#maxBatchRows = opts.maxBatchRows ?? opts.batchSize;
    this.#batchBytes = opts.batchBytes ?? Number.POSITIVE_INFINITY;
    this.#maxBatchBytes = opts.maxBatchBytes ?? this.#batchBytes;
    const maxHeld = Math.max(opts.maxHeld ?? opts.maxAckPending, opts.batchSize);
    this.#held = new HeldMessages(maxHeld, Math.max(1, Math.floor(maxHeld / 2)));
  }

  /** Messages received and not yet acked, nak'ed or termed. */
  get held(): number {
    return this.#held.size;
  }

  /** Whether a queued batch may join the one a writer takes: rows and bytes both within their bounds. */
  #fits(batch: IngestBatch, next: IngestBatch): boolean {
    return batch.size + next.size <= this.#maxBatchRows && batch.bytes + next.bytes <= this.#maxBatchBytes;
  }

  /** Whether the consumer is being read: false from a failed consume (stream or consumer gone, NATS away) until one starts again. */
  get consuming(): boolean {
    return this.#consuming;
  }

  /**
   * The consumer's backlog as last read from NATS (every `backlogSampleMs`); null while the
   * consumer is not read (stopped, or NATS away) or the last reading failed: no figure rather
   * than a stale one.
   */
  get backlog(): ConsumerBacklog | null {
    return this.#consuming && !this.#stopping ? this.#backlog : null;
  }

  async start(): Promise<void> {
    const consumer = await this.#openConsumer();
    // Held messages are reported in progress well within ack_wait, so a slow write is not redelivered.
    this.#touch = setInterval(() => this.#held.touch(), Math.max(250, Math.floor(this.opts.ackWaitMs / 2)));
    this.#touch.unref();
    let sampling = false;
    this.#sampler = setInterval(() => {
      if (sampling) return;
      sampling = true;
      void this.#sampleBacklog().finally(() => {
        sampling = false;
      });
    }, this.opts.backlogSampleMs ?? BACKLOG_SAMPLE_MS);
    this.#sampler.unref();
    this.#loop = this.#run(consumer);
  }

  async #sampleBacklog(): Promise<void> {
    const consumer = this.#consumer;
    if (consumer === null || !this.#consuming) {
      this.#backlog = null;
      return;
    }
    try {
      const info = await consumer.info();
      this.#backlog = { pending: info.num_pending, ackPending: info.num_ack_pending };
    } catch {
      this.#backlog = null;
    }
  }

  /**
   * Stops pulling, writes and acks what was already received, waits for in-flight batches, up to
   * `stopTimeoutMs`: a write that hangs (Postgres unresponsive) does not hold the shutdown, and
   * the messages of the batches left unacked are redelivered to the next ingest.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#held.wake();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.opts.stopTimeoutMs ?? 10_000);
    });
    const drain = async (): Promise<'done'> => {
      await this.#messages?.close();
      await this.#loop;
      this.#seal();
      while (this.#inFlight.size > 0) await Promise.all(this.#inFlight);
      return 'done';
    };
    if (this.#sampler !== null) clearInterval(this.#sampler);
    const outcome = await Promise.race([drain(), deadline]);
    clearTimeout(timer);
    if (this.#touch !== null) clearInterval(this.#touch);
    if (outcome === 'timeout') this.log.warn({ unacked: this.#held.size }, 'ingest stopped before its batches were written; NATS redelivers their messages');
  }

  /**
   * The stream and the durable consumer, created if missing. A consumer created anew (deleted,
   * or NATS restarted without its store) numbers its messages afresh: the held ones are forgotten.
   */
  async #openConsumer(): Promise<Consumer> {
    const jsm = await jetstreamManager(this.nc);
    const stream = await ensureStreamAndConsumer(jsm, this.opts);
    if (stream.duplicateWindowMs > DUPLICATE_WINDOW_MS && !this.#warnedWindow) {
      this.#warnedWindow = true;
      this.log.warn(
        { stream: this.opts.stream, duplicateWindowMs: stream.duplicateWindowMs },
        `NATS stream ${this.opts.stream} drops a message whose Nats-Msg-Id it has seen in the last ${stream.duplicateWindowMs} ms on any subject: ` +
          `two tenants' events sharing an EventID, published that close together with it as their Nats-Msg-Id, keep only the first. ` +
          `Postgres dedupes exactly without it; shorten it with: nats stream edit ${this.opts.stream} --dupe-window ${DUPLICATE_WINDOW_MS}ms`,
      );
    }
    if (stream.consumerWas !== undefined) {
      // Every ingest process shares the consumer, whose settings are the last one's to start.
      this.log.warn(
        { consumer: this.opts.consumer, was: stream.consumerWas, now: { ackWaitMs: this.opts.ackWaitMs, maxAckPending: this.opts.maxAckPending } },
        `NATS consumer ${this.opts.consumer} had other settings (INGEST_ACK_WAIT_MS, INGEST_WORKERS), set by another ingest process or an earlier run: changed to this one's; every ingest process sharing it should have the same`,
      );
    }
    const consumer = await jetstream(this.nc).consumers.get(this.opts.stream, this.opts.consumer);
    const created = (await consumer.info(true)).created;
    if (this.#consumerCreated !== null && created !== this.#consumerCreated) {
      this.log.warn({ stream: this.opts.stream, consumer: this.opts.consumer, held: this.#held.size }, 'NATS consumer was recreated; resuming from the new one');
      this.#held.clear();
    }
    this.#consumerCreated = created;
    return consumer;
  }

  async #run(first: Consumer): Promise<void> {
    let consumer: Consumer | null = first;
    let failures = 0;
    while (!this.#stopping) {
      // Too many messages held (the writes are slow): pull again once they are down to half.
      await this.#held.room();
      if (this.#stopping) break;
      try {
        consumer ??= await this.#openConsumer();
        // A deleted stream or consumer ends consume() with an error instead of a silent retry.
        const messages = await consumer.consume({ max_messages: this.opts.batchSize * 2, abort_on_missing_resource: true, callback: (m) => this.#receive(m) });
        this.#messages = messages;
        this.#consumer = consumer;
        this.#consuming = true;
        failures = 0;
        if (this.#stopping || this.#held.full) await messages.close();
        const err = await messages.closed();
        if (err instanceof Error && !this.#stopping) throw err;
      } catch (err) {
        this.#consuming = false;
        this.#consumer = null;
        this.#backlog = null;
        if (this.#stopping) break;
        consumer = null;
        failures++;
        this.log.error({ err: describeError(err), stream: this.opts.stream, consumer: this.opts.consumer }, 'NATS consume ended; recreating the stream and consumer if missing, then resuming');
        await sleep(Math.min(500 * 2 ** failures, 10_000));
      }
    }
  }

  /** Called by the NATS client for each message, in order: decode now, write later. Never throws. */
  #receive(m: JsMsg): void {
    if (this.#held.full) {
      // Not taken: JetStream redelivers it after ack_wait.
      void this.#messages?.close();
      return;
    }
    if (!this.#held.take(m)) {
      this.stats.redeliveriesSkipped++;
      return;
    }
    const batch = this.#batch;
    this.stats.received++;
    try {
      const subject = this.#subjects.parse(m.subject);
      if (!subject.ok) batch.reject(m, subject.reason, null);
      else if (this.tenants.knowsNow(subject.apiKeyId)) batch.decode(m, subject.apiKeyId, subject.event);
      else batch.defer(m, subject.apiKeyId, subject.event);
    } catch (err) {
      this.log.error({ err: describeError(err) }, 'could not take a NATS message; it will be redelivered');
      this.#held.release([m]);
    }
    if (this.#held.full) void this.#messages?.close();
    if (batch.size >= this.opts.batchSize || batch.bytes >= this.#batchBytes) this.#seal();
    else this.#timer ??= setTimeout(() => this.#seal(), this.opts.batchWaitMs);
  }

  /** Queues the batch being gathered for a writer. */
  #seal(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#batch.size === 0) return;
    this.#queue.push(this.#batch);
    this.#batch = new IngestBatch();
    this.#pump();
  }

  /** Starts writers while there are queued batches and free pipeline slots. */
  #pump(): void {
    while (this.#inFlight.size < this.opts.pipeline && this.#queue.length > 0) {
      const batch = this.#queue.shift() as IngestBatch;
      while (this.#queue.length > 0 && this.#fits(batch, this.#queue[0] as IngestBatch)) batch.absorb(this.#queue.shift() as IngestBatch);
      const job: Promise<void> = this.#process(batch).finally(() => {
        this.#held.release(batch.messages());
        this.#inFlight.delete(job);
        this.#pump();
      });
      this.#inFlight.add(job);
    }
  }

  async #process(batch: IngestBatch): Promise<void> {
    try {
      await this.#resolveTenants(batch);
      const { rows, rowMessages, letters, poison } = batch;
      const outcome = await writeBatch(this.db, rows, letters, (i, reason) => natsDeadLetter(rowMessages[i] as JsMsg, reason, (rows[i] as LogEventRow).api_key_id));
      if (this.#consecutiveFailures > 0) this.log.info({ failedBatches: this.#consecutiveFailures }, 'ingest batches stored again');
      this.#consecutiveFailures = 0;
      this.stats.stored += outcome.inserted;
      this.stats.duplicates += rows.length - outcome.inserted - outcome.refused.size;
      this.stats.deadLettered += letters.length + outcome.refused.size;
      for (let i = 0; i < rowMessages.length; i++) {
        const m = rowMessages[i] as JsMsg;
        if (outcome.refused.has(i)) m.term();
        else m.ack();
      }
      for (const m of poison) m.term();
    } catch (err) {
      // Transient: leave the events in the stream and try again later, backing off.
      this.#consecutiveFailures++;
      this.stats.failedBatches++;
      const delay = Math.min(100 * 2 ** this.#consecutiveFailures, 10_000);
      const messages = batch.messages();
      // Every batch fails while the database is away: one line every 10 s, not one a batch.
      if (this.#failureLog.take()) {
        this.log.warn({ err: describeError(err), messages: messages.length, retryInMs: delay, alsoFailedSince: this.#failureLog.suppressed }, 'ingest batch not stored; will retry');
      }
      for (const m of messages) m.nak(delay);
    }
  }

  /** Decodes the messages of tenants unknown on arrival, after reloading the tenants once. */
  async #resolveTenants(batch: IngestBatch): Promise<void> {
    if (batch.unresolved.length === 0) return;
    await this.tenants.ensureLoaded(batch.unresolved.map((u) => u.apiKeyId));
    batch.resolve((apiKeyId) => this.tenants.knows(apiKeyId));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
