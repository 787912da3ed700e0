import type { Config } from '../config.js';
import { type Db, connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import type { NewDeadLetter } from '../db/schema.js';
import { type LogEventRow, decodeEventValue, payloadTextProblem } from '../events/decode.js';
import { parseExactJson } from '../events/exact-json.js';
import { writeBatch } from '../ingest/batch-writer.js';
import { contentKey } from '../log/dead-letters.js';
import { TenantDirectory } from '../ingest/tenants.js';
import { type JsonLine, type LineTenant, lineTenant, openJsonLines, refuseUnknownApiKeyId } from './jsonl.js';
import { isApiKeyId } from '../events/schema.js';
import { CtrlC } from './interrupt.js';
import { startProgress } from './progress.js';

export interface ImportSummary {
  Imported: number;
  Duplicates: number;
  Rejected: number;
}

/**
 * `mailtally import <file.jsonl>`: events straight into the log in large batches (two in flight
 * on Postgres), with the same validation, dedupe and dead-lettering as live ingest.
 */
export async function runImport(config: Config, path: string, opts: { apiKeyId: string | undefined; batchSize: number }): Promise<number> {
  if (opts.apiKeyId !== undefined && !isApiKeyId(opts.apiKeyId)) throw new Error('--api-key-id must be a positive 64-bit integer');
  const db = await connectDb(config.database, { application: 'mailtally:import' });
  const ctrlC = new CtrlC('import');
  try {
    await migrateToLatest(db.kysely);
    // Every line without an APIKeyID of its own would be dead-lettered as of an unknown tenant.
    if (opts.apiKeyId !== undefined) await refuseUnknownApiKeyId(db.kysely, opts.apiKeyId);
    const summary = await importFile(db, path, { ...opts, batchBytes: config.ingest.batchBytes, pipeline: db.kind === 'postgres' ? 2 : 1, ctrlC });
    console.log(JSON.stringify(summary));
    return ctrlC.finish() ?? (summary.Rejected > 0 ? 3 : 0);
  } finally {
    ctrlC.dispose();
    await db.close();
  }
}

/** INGEST_BATCH_BYTES' default. */
const DEFAULT_BATCH_BYTES = 8 * 1024 * 1024;

export async function importFile(
  db: Db,
  path: string,
  opts: {
    apiKeyId: string | undefined;
    batchSize: number;
    /** A write is also sealed at this many bytes of lines (INGEST_BATCH_BYTES): the memory a write takes, about 5 times its bytes, stays bounded with large events. */
    batchBytes?: number;
    pipeline: number;
    quiet?: boolean;
    ctrlC?: CtrlC;
  },
): Promise<ImportSummary> {
  const input = openJsonLines(path);
  const tenants = new TenantDirectory(db.kysely);
  const summary: ImportSummary = { Imported: 0, Duplicates: 0, Rejected: 0 };
  const progress = opts.quiet === true ? null : startProgress('import', input.size);
  const inFlight = new Set<Promise<void>>();

  const write = async (lines: JsonLine[]) => {
    const values = lines.map((l): ParsedLine => (l.problem !== undefined ? { ok: false, reason: l.problem } : parseLine(l.text)));
    const found = values.map((v): LineTenant | null => (v.ok ? lineTenant(v.value, opts.apiKeyId) : null));
    await tenants.ensureLoaded([...found.flatMap((f) => (f?.ok === true ? [f.id] : [])), ...(opts.apiKeyId !== undefined ? [opts.apiKeyId] : [])]);
    // A line that is no event at all (not UTF-8, not JSON, too large…) is still the flag's tenant's, if it names a known one.
    const flagTenant = opts.apiKeyId !== undefined && tenants.knows(opts.apiKeyId) ? opts.apiKeyId : null;
    const rows: LogEventRow[] = [];
    const rowLines: JsonLine[] = [];
    const letters: NewDeadLetter[] = [];
    for (const [i, line] of lines.entries()) {
      const v = values[i] as ParsedLine;
      const f = found[i] ?? null;
      const tenant = f?.ok === true ? f.id : null;
      const reason = !v.ok ? v.reason : f?.ok === false ? f.reason : tenant !== null && !tenants.knows(tenant) ? `unknown APIKeyID ${tenant}` : null;
      const decoded = reason === null && v.ok && tenant !== null ? decodeEventValue(v.value, { apiKeyId: tenant }, line.text) : null;
      if (decoded?.ok === true) {
        rows.push(decoded.row);
        rowLines.push(line);
      }
      else letters.push(importDeadLetter(line, tenant ?? (v.ok ? null : flagTenant), reason ?? (decoded?.ok === false ? decoded.reason : 'invalid')));
    }
    const outcome = await writeBatch(db, rows, letters, (i, why) => importDeadLetter(rowLines[i] as JsonLine, (rows[i] as LogEventRow).api_key_id, why));
    summary.Imported += outcome.inserted;
    summary.Duplicates += rows.length - outcome.inserted - outcome.refused.size;
    summary.Rejected += letters.length + outcome.refused.size;
    progress?.update(input.bytesRead(), { events: summary.Imported + summary.Duplicates + summary.Rejected });
  };

  let batch: JsonLine[] = [];
  let batchBytes = 0;
  const maxBatchBytes = opts.batchBytes ?? DEFAULT_BATCH_BYTES;
  let failure: unknown = null;
  const flush = async () => {
    while (inFlight.size >= opts.pipeline) await Promise.race(inFlight);
    if (failure !== null) throw failure;
    const job = write(batch)
      .catch((err: unknown) => {
        failure ??= err;
      })
      .finally(() => inFlight.delete(job));
    inFlight.add(job);
    batch = [];
    batchBytes = 0;
  };
  opts.ctrlC?.watch();
  try {
    for await (const line of input.lines) {
      if (opts.ctrlC?.stopsReading() === true) break;
      batch.push(line);
      batchBytes += line.bytes.length;
      if (batch.length >= opts.batchSize || batchBytes >= maxBatchBytes) await flush();
    }
    if (batch.length > 0) await flush();
    await Promise.all(inFlight);
    if (failure !== null) throw failure;
  } finally {
    progress?.stop();
  }
  return summary;
}

type ParsedLine = { ok: true; value: unknown } | { ok: false; reason: string };

function parseLine(text: string): ParsedLine {
  // Before the parse: one nested deep enough would overflow its stack, and be called invalid JSON.
  const problem = payloadTextProblem(text);
  if (problem !== null) return { ok: false, reason: problem };
  try {
    return { ok: true, value: parseExactJson(text) };
  } catch (err) {
    return { ok: false, reason: `line is not valid JSON (${err instanceof Error ? err.message : String(err)})` };
  }
}

/** A rejected line's dead letter; the same line rejected again (the file imported again) is stored once. */
function importDeadLetter(line: JsonLine, apiKeyId: string | null, reason: string): NewDeadLetter {
  const text = `line ${line.lineNo}: ${reason}`;
  return {
    source: 'import',
    api_key_id: apiKeyId,
    reason: text,
    raw: Buffer.from(line.bytes),
    message_key: contentKey('import', apiKeyId, line.bytes, text),
  };
}
