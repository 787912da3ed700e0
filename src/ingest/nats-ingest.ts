import { type Consumer, type ConsumerMessages, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { describeError } from '../db/errors.js';
import type { Db } from '../db/connect.js';
import type { LogEventRow } from '../events/decode.js';
import type { Logger } from '../logger.js';
import { writeBatch } from './batch-writer.js';
import { HeldMessages } from './held-messages.js';
import { IngestBatch } from './ingest-batch.js';
import { natsDeadLetter } from './nats-message.js';
import { type ConsumerSettings, ensureStreamAndConsumer } from './nats-stream.js';
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
  /** Bytes of held messages at most; past it pulling stops until half are let go (default: no bound). */
  maxHeldBytes?: number;
  /** How long stop() waits for batches being written (default 10 s); their messages are redelivered. */
  stopTimeoutMs?: number;
}

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
 * The NATS ingest loop: a durable pull consumer, pulled one request at a time for no more messages
 * than there is room for among the held ones (in number, and in bytes at the size seen so far), so
 * every message a pull brings is taken. Messages are decoded as they arrive and gathered into
 * batches (up to `batchSize` or `batchBytes`, or `batchWaitMs` after the first); each batch is
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
  #messages: ConsumerMessages | null = null;
  #batch = new IngestBatch();
  #queue: IngestBatch[] = [];
  #timer: NodeJS.Timeout | null = null;
  #inFlight = new Set<Promise<void>>();
  #stopping = false;
  #consuming = false;
  #consumerCreated: string | null = null;
  #loop: Promise<void> | null = null;
  #consecutiveFailures = 0;
  /** Average size of the messages received (moving), to size the pulls; 0 before the first. */
  #averageBytes = 0;
  #lastBytes = 0;

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
    this.#held = new HeldMessages(maxHeld, Math.max(1, Math.floor(maxHeld / 2)), opts.maxHeldBytes ?? Number.POSITIVE_INFINITY);
  }

  /** Messages received and not yet acked, nak'ed or termed. */
  get held(): number {
    return this.#held.size;
  }

  /** Bytes of the held messages' data. */
  get heldBytes(): number {
    return this.#held.bytes;
  }

  /**
   * Messages one pull asks for: twice a batch, or as many as there is room for among the held
   * ones, in number and (at the average size seen) in bytes, and no more than PULL_BYTES: a pull
   * that brought more than the client may buffer would get it dropped as a slow consumer, and its
   * acks lost.
   */
  #pullSize(): number {
    const bytes = Math.min(PULL_BYTES, this.#held.byteLimit - this.#held.bytes);
    // Before any message is seen, one: the next pull knows their size.
    if (this.#averageBytes === 0 && Number.isFinite(bytes)) return 1;
    const n = Math.min(this.opts.batchSize * 2, this.#held.limit - this.#held.size, Math.floor(bytes / Math.max(this.#averageBytes, this.#lastBytes)));
    return Math.max(1, n);
  }

  /** A message's size, into the moving average (and the last size: a run of large events shrinks the next pull at once). */
  #sizeSeen(bytes: number): void {
    this.#averageBytes = this.#averageBytes === 0 ? bytes : this.#averageBytes * 0.9 + bytes * 0.1;
    this.#lastBytes = bytes;
  }

  /** Whether a queued batch may join the one a writer takes: rows and bytes both within their bounds. */
  #fits(batch: IngestBatch, next: IngestBatch): boolean {
    return batch.size + next.size <= this.#maxBatchRows && batch.bytes + next.bytes <= this.#maxBatchBytes;
  }

  /** Whether the consumer is being read: false from a failed consume (stream or consumer gone, NATS away) until one starts again. */
  get consuming(): boolean {
    return this.#consuming;
  }

  async start(): Promise<void> {
    const consumer = await this.#openConsumer();
    // Held messages are reported in progress well within ack_wait, so a slow write is not redelivered.
    this.#touch = setInterval(() => this.#held.touch(), Math.max(250, Math.floor(this.opts.ackWaitMs / 2)));
    this.#touch.unref();
    this.#loop = this.#run(consumer);
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
    await ensureStreamAndConsumer(jsm, this.opts);
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
        // One pull at a time, of no more than there is room for: every message it brings is
        // taken, and none waits for ack_wait because a pull was cut short. A deleted stream or
        // consumer ends the pull with an error.
        const messages = await consumer.fetch({ max_messages: this.#pullSize(), expires: PULL_EXPIRES_MS });
        this.#messages = messages;
        this.#consuming = true;
        if (this.#stopping) await messages.close();
        for await (const m of messages) this.#receive(m);
        const err = await messages.closed();
        if (err instanceof Error && !this.#stopping) throw err;
        failures = 0;
      } catch (err) {
        this.#consuming = false;
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
    if (!this.#held.take(m)) {
      this.stats.redeliveriesSkipped++;
      return;
    }
    const batch = this.#batch;
    this.stats.received++;
    this.#sizeSeen(m.data.length);
    try {
      const subject = this.#subjects.parse(m.subject);
      if (!subject.ok) batch.reject(m, subject.reason, null);
      else if (this.tenants.knows(subject.apiKeyId)) batch.decode(m, subject.apiKeyId, subject.event);
      else batch.defer(m, subject.apiKeyId, subject.event);
    } catch (err) {
      this.log.error({ err: describeError(err) }, 'could not take a NATS message; it will be redelivered');
      this.#held.release([m]);
    }
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
      this.log.warn({ err: describeError(err), messages: messages.length, retryInMs: delay }, 'ingest batch not stored; will retry');
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

/**
 * Bytes one pull may bring at most: half what a NATS server lets pile up for a client before it
 * drops it as a slow consumer (64 MiB by default). The pull asks for as many messages as fit at the
 * average size seen so far.
 */
const PULL_BYTES = 32 * 1024 * 1024;

/** How long a pull waits for messages when the stream has none. */
const PULL_EXPIRES_MS = 5000;
