import { sql } from 'kysely';
import { PROJECTIONS } from '../projections/index.js';
import { loadConfig } from '../src/config.js';
import { connectDb, type Db } from '../src/db/connect.js';
import { createLogger } from '../src/logger.js';
import { foldLog } from '../src/projector/fold-log.js';
import { Projector } from '../src/projector/runner.js';
import { median } from './ingest/report.js';
import { scratchLog } from './replay/load-log.js';
import type { BenchOptions } from './support/options.js';
import { cpuMs, pidsNamed } from './support/proc.js';
import { startResult } from './support/result.js';

/**
 * `npm run bench -- projector`: the live projector (the `projector` role's code, in this
 * process) draining a log of N generated events (default 100k) from position 0, in batches of
 * 50, 200 and 1,000 events — the sizes it works in at a few thousand events a second and when
 * it catches up. Per batch size: events/s, Node CPU and Postgres CPU per event, and the
 * read-model rows written per event (inserted, updated or deleted, from pg_stat_user_tables).
 * Same-run baseline: the replay's read + aggregate over the same log (every event read in order
 * and folded in memory, nothing written), after one untimed fold. Each drain starts from empty
 * read models and checkpoints, with a new projector on connections of its own.
 * What the freshness benchmark's latency is made of, without NATS, ingest or a publisher.
 */

const BATCH_SIZES = [50, 200, 1000];

interface Drain {
  eventsPerSec: number;
  nodeUsPerEvent: number;
  postgresUsPerEvent: number;
  rowsPerEvent: number;
  batches: number;
}

export async function runProjectorBench(opts: BenchOptions): Promise<void> {
  const count = opts.events ?? 100_000;
  const result = await startResult('projector');
  // The live projector's group cache as the service has it (PROJECTOR_CACHE_GROUPS, validated as the service does).
  const cacheGroups = loadConfig().projector.cacheGroups;
  const { db, url, stored, head, close } = await scratchLog('mt_bench_projector', count);
  try {
    progress(`log: ${stored} events stored from ${count} generated`);
    // One untimed fold first: the first run's baseline would otherwise run code not yet optimized by the JIT.
    await foldLog(db, PROJECTIONS, head, { readBatch: 50_000 }, null);
    const baseline: number[] = [];
    const drains = new Map<number, Drain[]>(BATCH_SIZES.map((b) => [b, []]));
    for (let run = 1; run <= opts.runs; run++) {
      const started = performance.now();
      await foldLog(db, PROJECTIONS, head, { readBatch: 50_000 }, null);
      baseline.push((stored * 1000) / (performance.now() - started));
      progress(`run ${run}: read + aggregate ${Math.round(baseline.at(-1) ?? 0)} events/s`);
      for (const size of BATCH_SIZES) {
        const d = await drain(db, url, size, stored, cacheGroups);
        drains.get(size)?.push(d);
        progress(
          `run ${run}: batches of ${size}: ${Math.round(d.eventsPerSec)} events/s in ${d.batches} batches; per event Node ${d.nodeUsPerEvent.toFixed(0)} µs, Postgres ${d.postgresUsPerEvent.toFixed(0)} µs, ${d.rowsPerEvent.toFixed(2)} rows written`,
        );
      }
    }

    // Each batch size's medians, for the console table and the result file alike.
    const sizes = [...drains].map(([size, ds]) => ({
      size,
      perRun: ds.map((d) => d.eventsPerSec),
      nodeUs: Math.round(median(ds.map((d) => d.nodeUsPerEvent))),
      postgresUs: Math.round(median(ds.map((d) => d.postgresUsPerEvent))),
      rows: median(ds.map((d) => d.rowsPerEvent)).toFixed(2),
    }));
    const table: Record<string, Record<string, string | number>> = { 'baseline: read + aggregate': { 'events/s': Math.round(median(baseline)) } };
    for (const s of sizes) {
      table[`live projector, batches of ${s.size}`] = { 'events/s': Math.round(median(s.perRun)), 'Node µs/event': s.nodeUs, 'Postgres µs/event': s.postgresUs, 'rows/event': Number(s.rows) };
    }
    console.log(`\nlive projector draining ${stored} events (medians of ${opts.runs} runs)`);
    console.table(table);
    const file = await result.write(
      { events: stored, generated: count, runs: opts.runs, batchSizes: BATCH_SIZES },
      sizes.map((s) => ({
        name: `live projector, batches of ${s.size}`,
        unit: 'events/s',
        perRun: s.perRun,
        baseline: { name: 'read + aggregate, no writes', perRun: baseline },
        note: `per event: Node ${s.nodeUs} µs, Postgres ${s.postgresUs} µs CPU; ${s.rows} read-model rows written`,
      })),
    );
    console.log(`results: ${file}`);
  } finally {
    await close();
  }
}

/**
 * Empties the read models, then lets a projector drain the whole log in batches of `size`, on
 * connections of its own: closed after it, their backends report every row they wrote.
 */
async function drain(db: Db, url: string, size: number, events: number, cacheGroups: number): Promise<Drain> {
  for (const p of PROJECTIONS) for (const t of p.tables) await sql.raw(`TRUNCATE ${t.name}`).execute(db.kysely);
  await sql`UPDATE checkpoints SET position = 0`.execute(db.kysely);
  await sql`DELETE FROM leases`.execute(db.kysely);
  const rowsBefore = await rowsWritten(db);
  const postgresBefore = new Map(pidsNamed('postgres').map((pid) => [pid, cpuMs(pid)]));
  const cpu = process.cpuUsage();
  const started = performance.now();
  const own = await connectDb({ kind: 'postgres', url, poolSize: 4 }, { application: 'mailtally:bench' });
  const projector = new Projector(own, PROJECTIONS, { batchSize: size, pollMs: 1000, leaseMs: 15_000, cacheGroups }, createLogger('warn'));
  await projector.start();
  while (projector.stats.events < events) {
    if (performance.now() - started > 600_000) throw new Error(`the projector drained ${projector.stats.events} of ${events} events in 10 minutes`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const postgresMs = pidsNamed('postgres').reduce((sum, pid) => sum + cpuMs(pid) - (postgresBefore.get(pid) ?? 0), 0);
  await projector.stop();
  await own.close();
  // A backend reports its table statistics as it exits, just after its connection closes.
  await new Promise((r) => setTimeout(r, 500));
  const rows = (await rowsWritten(db)) - rowsBefore;
  return {
    eventsPerSec: (events * 1000) / ms,
    nodeUsPerEvent: (used.user + used.system) / events,
    postgresUsPerEvent: (postgresMs * 1000) / events,
    rowsPerEvent: rows / events,
    batches: projector.stats.batches,
  };
}

/** Rows inserted, updated or deleted in the read-model tables so far. */
async function rowsWritten(db: Db): Promise<number> {
  const tables = PROJECTIONS.flatMap((p) => p.tables.map((t) => t.name));
  const { rows } = await sql<{ n: string }>`
    SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::text AS n FROM pg_stat_user_tables WHERE relname IN (${sql.join(tables)})`.execute(db.kysely);
  return Number(rows[0]?.n ?? 0);
}

const progress = (line: string) => process.stderr.write(`${line}\n`);
