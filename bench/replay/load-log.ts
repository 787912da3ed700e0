import { sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.js';
import { connectDb, type Db } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { logHead } from '../../src/log/read.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { decodeEventText, type LogEventRow } from '../../src/events/decode.js';
import { writeBatch } from '../../src/ingest/batch-writer.js';
import { type GenerateOptions, generateEvents } from '../support/generate.js';
import { createScratchDatabase } from '../support/scratch.js';

/** Fills the log with `count` generated events (5% duplicates, dropped by the log) through the product's batch writer. */
export async function loadLog(db: Db, count: number, onProgress: (done: number) => void, generate: Omit<GenerateOptions, 'count'> = {}): Promise<number> {
  let batch: LogEventRow[] = [];
  let done = 0;
  let stored = 0;
  const flush = async () => {
    const outcome = await writeBatch(db, batch, [], (i, reason) => {
      throw new Error(`row ${i} refused: ${reason}`);
    });
    stored += outcome.inserted;
    batch = [];
    onProgress(done);
  };
  for (const g of generateEvents({ ...generate, count })) {
    const decoded = decodeEventText(g.text, { apiKeyId: g.apiKeyId });
    if (!decoded.ok) throw new Error(`generated event rejected: ${decoded.reason}`);
    batch.push(decoded.row);
    done += 1;
    if (batch.length >= 20_000) await flush();
  }
  if (batch.length > 0) await flush();
  return stored;
}

export interface ScratchLog {
  readonly db: Db;
  readonly url: string;
  /** Events stored (the generated ones less the duplicates the log dropped). */
  readonly stored: number;
  readonly head: bigint;
  /** Closes the connections and drops the database. */
  close(): Promise<void>;
}

/**
 * A scratch database with the schema and every read model's tables, its log filled with `count`
 * generated events and analyzed. Ctrl-C drops it too.
 */
export async function scratchLog(prefix: string, count: number, onProgress: (done: number) => void = () => {}): Promise<ScratchLog> {
  const scratch = await createScratchDatabase(prefix);
  const db = await connectDb({ kind: 'postgres', url: scratch.url, poolSize: 4 }, { application: 'mailtally:bench' });
  const close = async () => {
    process.off('SIGINT', onSignal);
    await db.close();
    await scratch.drop();
  };
  const onSignal = () => void close().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  try {
    await migrateToLatest(db.kysely);
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    const stored = await loadLog(db, count, onProgress);
    await sql`VACUUM ANALYZE events`.execute(db.kysely);
    return { db, url: scratch.url, stored, head: await logHead(db.kysely), close };
  } catch (err) {
    await close();
    throw err;
  }
}
