import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { TableSpec, Value } from '../../projections/kit/types.js';
import { CopyText } from './copy-text.js';
import type { Fence } from './fence.js';
import type { ShadowRows } from './shadow-rows.js';
import { allColumns } from './tables.js';

interface Queued {
  readonly table: string;
  readonly columns: string;
  readonly chunk: Buffer;
}

/**
 * Shadow rows on Postgres, written while the log is still being read and folded: each row is
 * encoded as COPY text as the fold emits it, and one connection streams the chunks, one COPY
 * per run of queued chunks of a table, all in one transaction (rows frozen: nothing is left
 * for vacuum). The tables' indexes are kept up as the rows come (see `finish-shadows.ts`).
 * The fold calls `room()` now and then: it yields to the event loop (so the chunks flow) and
 * waits while too much is queued.
 */
export class CopyShadowRows implements ShadowRows {
  private readonly texts = new Map<string, CopyText>();
  private readonly queue: Queued[] = [];
  private readonly truncated = new Set<string>();
  private queuedBytes = 0;
  private client: pg.PoolClient | null = null;
  private inTransaction = false;
  private running: Promise<void> | null = null;
  private failure: unknown = null;
  private waiting: (() => void) | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly suffix: string,
    /** Run before the commit (fence.ts). */
    private readonly fence?: Fence,
    private readonly maxQueuedBytes = 64 << 20,
  ) {}

  /** Rows handed over so far. */
  get rows(): number {
    let n = 0;
    for (const t of this.texts.values()) n += t.rows;
    return n;
  }

  row(spec: TableSpec, keys: readonly Value[], columns: readonly Value[]): void {
    const text = this.texts.get(spec.name) ?? this.open(spec);
    text.begin();
    text.values(keys);
    text.values(columns);
    text.end();
  }

  /** Lets queued chunks flow; waits while more than the limit is queued. */
  async room(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queuedBytes > this.maxQueuedBytes && this.failure === null) await new Promise<void>((resolve) => (this.waiting = resolve));
    if (this.failure !== null) throw this.failure;
  }

  /** Writes what is left and commits. */
  async finish(): Promise<void> {
    for (const text of this.texts.values()) text.flush();
    this.start();
    await this.running;
    if (this.failure !== null) throw this.failure;
    if (this.client !== null) {
      await this.fence?.(this.client);
      await this.client.query('COMMIT');
      this.inTransaction = false;
    }
  }

  /** Releases the connection (rolling back unless finished); safe to call after `finish` or a failure. */
  async close(): Promise<void> {
    this.queue.length = 0;
    await this.running?.catch(() => {});
    const client = this.client;
    this.client = null;
    if (client === null) return;
    let broken: Error | undefined;
    if (this.inTransaction) await client.query('ROLLBACK').catch((err: unknown) => (broken = err instanceof Error ? err : new Error(String(err))));
    client.release(broken);
  }

  private open(spec: TableSpec): CopyText {
    const table = spec.name + this.suffix;
    const columns = allColumns(spec).map((c) => c.name).join(', ');
    const text = new CopyText((chunk) => {
      this.queue.push({ table, columns, chunk });
      this.queuedBytes += chunk.length;
      this.start();
    });
    this.texts.set(spec.name, text);
    return text;
  }

  private start(): void {
    if (this.running !== null || this.queue.length === 0) return;
    this.running = this.drain().then(
      () => {
        this.running = null;
        this.start();
      },
      (err: unknown) => {
        this.failure = err;
        this.queue.length = 0;
        this.wake();
      },
    );
  }

  /** One COPY per table at the head of the queue, taking that table's chunks until none is queued. */
  private async drain(): Promise<void> {
    if (this.client === null) {
      this.client = await this.pool.connect();
      await this.client.query('BEGIN');
      this.inTransaction = true;
    }
    while (this.queue.length > 0) {
      const { table, columns } = this.queue[0] as Queued;
      if (!this.truncated.has(table)) {
        // Emptied (it is empty already) in the transaction that fills it, so COPY may write its rows frozen.
        await this.client.query(`TRUNCATE ${table}`);
        this.truncated.add(table);
      }
      await pipeline(this.take(table), this.client.query(copyFrom(`COPY ${table} (${columns}) FROM STDIN WITH (FREEZE)`)) as unknown as NodeJS.WritableStream);
    }
  }

  /** The queued chunks of `table`, in order, as long as there are some. */
  private *take(table: string): Generator<Buffer> {
    for (;;) {
      const i = this.queue.findIndex((q) => q.table === table);
      if (i < 0) return;
      const { chunk } = this.queue.splice(i, 1)[0] as Queued;
      this.queuedBytes -= chunk.length;
      this.wake();
      yield chunk;
    }
  }

  private wake(): void {
    if (this.queuedBytes > this.maxQueuedBytes / 2 && this.failure === null) return;
    const w = this.waiting;
    this.waiting = null;
    w?.();
  }
}
