import { Worker } from 'node:worker_threads';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { IngestStats } from './nats-ingest.js';

const WORKER_ENTRY = new URL('../../bin/ingest-worker.js', import.meta.url);

/**
 * NATS ingest spread over worker threads (INGEST_WORKERS > 1), so decoding and encoding use
 * more than one core. Each worker is a full ingest on the shared durable consumer, exactly as
 * several ingest processes would be; appends still serialize on the log's append lock.
 */
export class IngestWorkers {
  readonly #workers: Worker[] = [];
  readonly #stats: IngestStats[] = [];
  readonly #consuming: boolean[] = [];

  constructor(
    private readonly config: Config,
    private readonly count: number,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.count }, (_, index) => this.#startOne(index)));
  }

  get stats(): IngestStats {
    const total: IngestStats = { received: 0, stored: 0, duplicates: 0, deadLettered: 0, failedBatches: 0, redeliveriesSkipped: 0 };
    for (const s of this.#stats) for (const k of Object.keys(total) as (keyof IngestStats)[]) total[k] += s[k];
    return total;
  }

  /** Whether every worker reads its consumer. */
  get consuming(): boolean {
    return this.#consuming.every((c) => c);
  }

  async stop(): Promise<void> {
    await Promise.all(this.#workers.map((w, i) => this.#stopOne(w, i)));
  }

  #startOne(index: number): Promise<void> {
    const worker = new Worker(WORKER_ENTRY, { workerData: { config: this.config, index } });
    this.#workers.push(worker);
    this.#stats[index] = { received: 0, stored: 0, duplicates: 0, deadLettered: 0, failedBatches: 0, redeliveriesSkipped: 0 };
    this.#consuming[index] = true;
    worker.on('message', (m: { type: string; stats?: IngestStats; consuming?: boolean }) => {
      if (m.stats !== undefined) this.#stats[index] = m.stats;
      if (m.consuming !== undefined) this.#consuming[index] = m.consuming;
    });
    worker.on('error', (err) => this.log.error({ err, worker: index }, 'ingest worker failed'));
    return new Promise((resolve, reject) => {
      const onMessage = (m: { type: string }) => {
        if (m.type !== 'started') return;
        worker.off('message', onMessage);
        resolve();
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`ingest worker ${index} exited with code ${code} while starting`)));
    });
  }

  #stopOne(worker: Worker, index: number): Promise<void> {
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
