import type { Db } from '../../src/db/connect.js';
import { decodeEventText, type LogEventRow } from '../../src/events/decode.js';
import { writeBatch } from '../../src/ingest/batch-writer.js';
import { type GenerateOptions, generateEvents } from '../support/generate.js';

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
