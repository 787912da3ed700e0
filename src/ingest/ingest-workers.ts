import { Worker } from 'node:worker_threads';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { ConsumerBacklog, IngestStats } from './nats-ingest.js';

const WORKER_ENTRY = new URL('../../bin/ingest-worker.js', import.meta.url);

/** Delay before a worker that died is started again: doubling from 1 s up to 30 s while it keeps dying. */
const RESTART_DELAYS_MS = { first: 1000, max: 30_000 };
/** A worker that ran this long before dying starts its next restart at the first delay again. */
const HEALTHY_RUN_MS = 60_000;

const noStats = (): IngestStats => ({ received: 0, stored: 0, duplicates: 0, deadLettered: 0, failedBatches: 0, redeliveriesSkipped: 0 });

/**
 * NATS ingest spread over worker threads (INGEST_WORKERS > 1), so decoding and encoding use
 * more than one core. Each worker is a full ingest on the shared durable consumer, exactly as
 * several ingest processes would be; appends still serialize on the log's append lock.
 *
 * A worker that dies (an uncaught error, its thread terminated) is started again after a delay,
 * doubling while it keeps dying; meanwhile `consuming` is false. Nothing is lost: the messages it
 * held were not acked, and NATS redelivers them to the other workers or to its successor. The
 * counters it last reported (each worker reports every second) stay in the totals; what it
 * counted after that report is gone with it.
 */
export class IngestWorkers {
  readonly #workers: Worker[] = [];
  readonly #stats: IngestStats[] = [];
  readonly #consuming: boolean[] = [];
  /** Each worker's last reading of the consumer's backlog (they share the consumer). */
  readonly #backlog: (ConsumerBacklog | null)[] = [];
  /** Counters of workers that died, so the totals never go back. */
  readonly #retired = noStats();
  readonly #restartDelay: number[] = [];
  readonly #restartTimers = new Set<NodeJS.Timeout>();
  readonly #exited = new WeakSet<Worker>();
  #stopping = false;
  /** Workers started again after dying. */
  restarts = 0;

  constructor(
    private readonly config: Config,
    private readonly count: number,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.count }, (_, index) => this.#startOne(index)));
  }

  get stats(): IngestStats {
    const total: IngestStats = { ...this.#retired };
    for (const s of this.#stats) for (const k of Object.keys(total) as (keyof IngestStats)[]) total[k] += s[k];
    return total;
  }

  /** The running threads (a test terminates one to see it replaced). */
  get threads(): readonly Worker[] {
    return this.#workers;
  }

  /** The shared consumer's backlog as a worker last read it (the first that has a reading). */
  get backlog(): ConsumerBacklog | null {
    return this.#backlog.find((b, i) => b != null && this.#consuming[i] === true) ?? null;
  }

  /** Whether every worker reads its consumer. */
  get consuming(): boolean {
    return this.#consuming.every((c) => c);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    for (const timer of this.#restartTimers) clearTimeout(timer);
    this.#restartTimers.clear();
    await Promise.all(this.#workers.map((w, i) => this.#stopOne(w, i)));
  }

  #startOne(index: number): Promise<void> {
    const worker = new Worker(WORKER_ENTRY, { workerData: { config: this.config, index } });
    const startedAt = Date.now();
    let started = false;
    this.#workers[index] = worker;
    this.#stats[index] = noStats();
    // Not consuming until it says it started (a start that hangs is not reported as consuming).
    this.#consuming[index] = false;
    this.#backlog[index] = null;
    worker.on('message', (m: { type: string; stats?: IngestStats; consuming?: boolean; backlog?: ConsumerBacklog | null }) => {
      if (m.stats !== undefined) this.#stats[index] = m.stats;
      if (m.consuming !== undefined) this.#consuming[index] = m.consuming;
      if (m.backlog !== undefined) this.#backlog[index] = m.backlog;
    });
    worker.on('error', (err) => this.log.error({ err, worker: index }, 'ingest worker failed'));
    worker.once('exit', (code) => {
      this.#exited.add(worker);
      if (!started || this.#stopping || this.#workers[index] !== worker) return;
      this.#restartLater(index, code, Date.now() - startedAt);
    });
    return new Promise((resolve, reject) => {
      const onMessage = (m: { type: string }) => {
        if (m.type !== 'started') return;
        worker.off('message', onMessage);
        started = true;
        if (!this.#stopping) this.#consuming[index] = true;
        resolve();
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`ingest worker ${index} exited with code ${code} while starting`)));
    });
  }

  /** A worker died: its counters go to the totals, and it is started again after a delay (again and again while starting fails). */
  #restartLater(index: number, code: number | null, ranMs: number | null): void {
    const dead = this.#stats[index] ?? noStats();
    for (const k of Object.keys(dead) as (keyof IngestStats)[]) this.#retired[k] += dead[k];
    this.#stats[index] = noStats();
    this.#consuming[index] = false;
    this.#backlog[index] = null;
    const previous = ranMs !== null && ranMs >= HEALTHY_RUN_MS ? 0 : (this.#restartDelay[index] ?? 0);
    const delay = previous === 0 ? RESTART_DELAYS_MS.first : Math.min(previous * 2, RESTART_DELAYS_MS.max);
    this.#restartDelay[index] = delay;
    this.log.error({ worker: index, code, restartInMs: delay }, 'ingest worker exited; starting it again (its unacked messages are redelivered)');
    const timer = setTimeout(() => {
      this.#restartTimers.delete(timer);
      if (this.#stopping) return;
      this.#startOne(index).then(
        () => {
          if (this.#stopping) return;
          this.restarts += 1;
          this.log.info({ worker: index }, 'ingest worker started again');
        },
        (err: unknown) => {
          this.log.error({ err, worker: index }, 'ingest worker could not start again');
          if (!this.#stopping) this.#restartLater(index, null, null);
        },
      );
    }, delay);
    this.#restartTimers.add(timer);
  }

  #stopOne(worker: Worker, index: number): Promise<void> {
    // A worker that died and waits for its restart has nothing left to stop.
    if (this.#exited.has(worker)) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => void worker.terminate(), 30_000);
      worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      worker.on('message', (m: { type: string; stats?: IngestStats }) => {
        if (m.type === 'stopped' && m.stats !== undefined) this.#stats[index] = m.stats;
      });
      worker.postMessage('stop');
    });
  }
}
