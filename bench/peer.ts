import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { findProjection, PROJECTIONS } from '../projections/index.js';
import { connectDb } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { decodeEventText, type LogEventRow } from '../src/events/decode.js';
import { writeBatch } from '../src/ingest/batch-writer.js';
import { eventKey } from '../src/log/append.js';
import { replay } from '../src/projector/replay.js';
import { ensureProjectionTables } from '../src/projector/tables.js';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { countSkippable, emmettAppend, emmettRebuild, readEmmettCounters } from './peer/emmett.js';
import { Cleanup } from './support/cleanup.js';
import { generateEvents } from './support/generate.js';
import type { BenchOptions } from './support/options.js';
import { startResult } from './support/result.js';
import { createScratchDatabase } from './support/scratch.js';

/**
 * `npm run bench -- peer`: mailtally beside @event-driven-io/emmett-postgresql on the same
 * generated events (decoded once, duplicates dropped, not timed), each side in its own scratch
 * database on the same Postgres, in the same run:
 * - append: mailtally's ingest append (writeBatch: COPY to staging + INSERT … ON CONFLICT, 20k rows a batch) vs
 *   emmett's appendToStream, one stream per message, all of a message's events in one call,
 *   EMMETT_CONCURRENCY calls in flight (its best case: emmett has no multi-stream batch append);
 * - rebuild: mailtally's replay of the campaign-overview read model vs emmett's
 *   rebuildPostgreSQLProjections of per-campaign distinct sent/open/click/bounce counters (see
 *   bench/peer/emmett.ts); the two must agree on those four counts.
 */

const SEED = 20_261_124;
const CONCURRENCY = Number(process.env['EMMETT_CONCURRENCY'] ?? 8);
const PULL_BATCH = Number(process.env['EMMETT_PULL_BATCH'] ?? 1000);
const log = (msg: string) => process.stderr.write(`[peer bench] ${msg}\n`);
const rate = (n: number, ms: number) => Math.round((n * 1000) / ms);

interface RunResult {
  mailtallyAppendMs: number;
  emmettAppendMs: number;
  mailtallyReplayMs: number;
  emmettRebuildMs: number;
  countsDiffer: number;
  emmettSkipped: number;
  load1: { append: number; rebuild: number };
}

export async function runPeerBench(opts: BenchOptions): Promise<void> {
  const count = opts.events ?? 50_000;
  const result = await startResult('peer');
  const projection = findProjection('campaign-overview');
  if (projection === undefined) throw new Error('no campaign-overview projection');
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  try {
    const { rows, messages } = distinctRows(count);
    log(`${count} generated → ${rows.length} distinct events in ${messages.length} messages; emmett: ${CONCURRENCY} appends in flight, rebuild pulls ${PULL_BATCH}`);
    const runs: RunResult[] = [];
    for (let run = 1; run <= opts.runs; run++) {
      const ours = await createScratchDatabase('mt_bench_peer');
      const dropOurs = cleanup.add(`drop ${ours.name}`, ours.drop);
      const theirs = await createScratchDatabase('mt_bench_emmett');
      const dropTheirs = cleanup.add(`drop ${theirs.name}`, theirs.drop);
      const db = await connectDb({ kind: 'postgres', url: ours.url, poolSize: 4 }, { application: 'mailtally:bench' });
      try {
        await migrateToLatest(db.kysely);
        await ensureProjectionTables(db.kysely, PROJECTIONS);
        const appendLoad = loadavg()[0] ?? 0;
        let started = performance.now();
        for (let i = 0; i < rows.length; i += 20_000) {
          await writeBatch(db, rows.slice(i, i + 20_000), [], (_, reason) => {
            throw new Error(`refused: ${reason}`);
          });
        }
        const mailtallyAppendMs = performance.now() - started;
        const emmettAppendMs = await emmettAppend(theirs.url, messages, CONCURRENCY);
        await sql`VACUUM ANALYZE events`.execute(db.kysely);

        const rebuildLoad = loadavg()[0] ?? 0;
        started = performance.now();
        await replay(db, [projection], { readBatch: 50_000, catchUpBatch: 5000 });
        const mailtallyReplayMs = performance.now() - started;
        const emmettRebuildMs = await emmettRebuild(theirs.url, PULL_BATCH);
        const countsDiffer = compare(await readEmmettCounters(theirs.url), await campaignStats(db));
        const emmettSkipped = await countSkippable(theirs.url);
        const r = { mailtallyAppendMs, emmettAppendMs, mailtallyReplayMs, emmettRebuildMs, countsDiffer, emmettSkipped, load1: { append: appendLoad, rebuild: rebuildLoad } };
        runs.push(r);
        log(
          `run ${run}: append mailtally ${rate(rows.length, mailtallyAppendMs)} ev/s, emmett ${rate(rows.length, emmettAppendMs)} ev/s | ` +
            `rebuild mailtally ${rate(rows.length, mailtallyReplayMs)} ev/s, emmett ${rate(rows.length, emmettRebuildMs)} ev/s | campaigns whose counts differ: ${countsDiffer} (events emmett's rebuild skipped: ${emmettSkipped}) | load ${appendLoad.toFixed(2)}/${rebuildLoad.toFixed(2)}`,
        );
        // Differences explained by emmett's skipped events are emmett's; any other is a failure.
        if (countsDiffer !== 0 && emmettSkipped === 0) process.exitCode = 1;
      } finally {
        await db.close();
        await dropOurs();
        await dropTheirs();
      }
    }
    const per = (pick: (r: RunResult) => number) => runs.map((r) => rate(rows.length, pick(r)));
    const summary = {
      benchmark: 'peer',
      events: rows.length,
      generated: count,
      messages: messages.length,
      emmett: { version: '0.42.0', appendConcurrency: CONCURRENCY, pullBatch: PULL_BATCH },
      medians: {
        mailtallyAppend: median(per((r) => r.mailtallyAppendMs)),
        emmettAppend: median(per((r) => r.emmettAppendMs)),
        mailtallyReplay: median(per((r) => r.mailtallyReplayMs)),
        emmettRebuild: median(per((r) => r.emmettRebuildMs)),
      },
      source: sourceVersion(),
      perRun: runs,
    };
    const m = summary.medians;
    console.log(`\npeer comparison: ${rows.length} distinct events, ${messages.length} messages, medians of ${runs.length} run(s)`);
    console.table({
      'append to the log / event store': { 'mailtally ev/s': m.mailtallyAppend, 'emmett ev/s': m.emmettAppend, 'mailtally / emmett': Number((m.mailtallyAppend / m.emmettAppend).toFixed(2)) },
      'rebuild one read model': { 'mailtally ev/s': m.mailtallyReplay, 'emmett ev/s': m.emmettRebuild, 'mailtally / emmett': Number((m.mailtallyReplay / m.emmettRebuild).toFixed(2)) },
    });
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `peer-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`results: ${file}`);
    await result.write({ events: rows.length, generated: count, messages: messages.length, runs: runs.length, emmett: summary.emmett }, [
      {
        name: 'append: mailtally ingest append (COPY, 20k-row batches)',
        unit: 'events/s',
        perRun: per((r) => r.mailtallyAppendMs),
        baseline: { name: `emmett appendToStream, a stream per message, ${CONCURRENCY} in flight`, perRun: per((r) => r.emmettAppendMs) },
      },
      {
        name: 'rebuild: mailtally replay of campaign-overview',
        unit: 'events/s',
        perRun: per((r) => r.mailtallyReplayMs),
        baseline: { name: 'emmett rebuildPostgreSQLProjections, campaign counters', perRun: per((r) => r.emmettRebuildMs) },
        note: `campaigns whose four counts differ between the two: ${runs.map((r) => r.countsDiffer).join(' · ')}; events emmett's rebuild skipped: ${runs.map((r) => r.emmettSkipped).join(' · ')}`,
      },
    ], runs.map((r, i) => `run ${i + 1}: load average (1 min) ${r.load1.append.toFixed(2)} at the appends, ${r.load1.rebuild.toFixed(2)} at the rebuilds`));
  } finally {
    offSignals();
    await cleanup.runAll();
  }
}

/** The generated events decoded as ingest does, first of each (tenant, EventID) kept, and grouped by message. */
function distinctRows(count: number): { rows: LogEventRow[]; messages: LogEventRow[][] } {
  const seen = new Set<string>();
  const rows: LogEventRow[] = [];
  const byMessage = new Map<string, LogEventRow[]>();
  for (const g of generateEvents({ count, seed: SEED })) {
    const decoded = decodeEventText(g.text, { apiKeyId: g.apiKeyId });
    if (!decoded.ok) throw new Error(`generated event rejected: ${decoded.reason}`);
    const row = decoded.row;
    const key = eventKey(row.api_key_id, row.event_id);
    if (seen.has(key)) continue;
    seen.add(key);
    rows.push(row);
    const stream = `${row.api_key_id}:${row.message_id ?? `event:${row.event_id}`}`;
    const list = byMessage.get(stream);
    if (list !== undefined) list.push(row);
    else byMessage.set(stream, [row]);
  }
  return { rows, messages: [...byMessage.values()] };
}

async function campaignStats(db: Awaited<ReturnType<typeof connectDb>>): Promise<Map<string, number[]>> {
  const r = await sql<{ k: string; delivered: string; opened: string; clicked: string; bounced: string }>`
    SELECT api_key_id || ':' || campaign_id AS k, delivered, opened, clicked, bounced FROM campaign_stats`.execute(db.kysely);
  return new Map(r.rows.map((x) => [x.k, [Number(x.delivered), Number(x.opened), Number(x.clicked), Number(x.bounced)]]));
}

/** Campaigns whose four counts differ (or exist on one side only; all-zero rows count as absent). */
function compare(a: Map<string, number[]>, b: Map<string, number[]>): number {
  const nonZero = (m: Map<string, number[]>) => new Map([...m].filter(([, v]) => v.some((x) => x !== 0)));
  const x = nonZero(a);
  const y = nonZero(b);
  let differ = 0;
  for (const k of new Set([...x.keys(), ...y.keys()])) if ((x.get(k) ?? []).join() !== (y.get(k) ?? []).join()) differ++;
  return differ;
}
