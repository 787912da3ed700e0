import { sql } from 'kysely';
import { PROJECTIONS } from '../projections/index.js';
import type { Db } from '../src/db/connect.js';
import { foldLog } from '../src/projector/fold-log.js';
import { replay, type ReplayPhase } from '../src/projector/replay.js';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { scratchLog } from './replay/load-log.js';
import { writeFloor } from './replay/write-floor.js';
import type { BenchOptions } from './support/options.js';
import { startResult } from './support/result.js';
import { serverFacts } from './support/scratch.js';
import { formatProfileSummary, summarizeCpuProfile } from './support/cpu-profile.js';
import { withCpuProfile } from './support/in-process-profile.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `npm run bench -- replay`: rebuild every read model from a log of N generated events (default
 * 2M) as `mailtally replay` does (set-based SQL), beside what was measured in the same run on the
 * same log:
 * - read+aggregate: the fold's reader and fold, in memory, writing nothing;
 * - SQL GROUP BY: one set-based statement over the log computing per-campaign distinct-message
 *   and event counts (what the server alone can do);
 * - the fold's rebuild (`engine: 'fold'`, the engine before the set-based one), with its writes;
 * - the write floor: the read models the replay built copied into bare tables that then get
 *   their keys and indexes, as the rebuild writes them, with nothing computed
 *   (`replay/write-floor.ts`): no rebuild on this server can be faster.
 * Each phase runs `runs` times; medians and the ratio replay / read+aggregate are printed.
 * `--profile` records a CPU profile of run 1's read+aggregate and of its replay (both run in
 * this process) and prints a summary of each.
 */
export async function runReplayBench(opts: BenchOptions): Promise<void> {
  const count = opts.events ?? 2_000_000;
  const result = await startResult('replay');
  const loadStarted = Date.now();
  const { db, stored, head, close } = await scratchLog('mt_bench_replay', count, (done) => progressLine(`loading log ${done}/${count}`));
  try {
    process.stderr.write(`\nlog: ${stored} events stored from ${count} generated (${((Date.now() - loadStarted) / 1000).toFixed(0)} s)\n`);

    const runs: RunResult[] = [];
    const profileDir = opts.profile ? join(RESULTS_DIR, 'profiles', `replay-${new Date().toISOString().replace(/[:.]/g, '-')}`) : null;
    if (profileDir !== null) mkdirSync(profileDir, { recursive: true });
    const profiled = <T>(run: number, name: string, fn: () => Promise<T>): Promise<T> =>
      profileDir !== null && run === 1 ? withCpuProfile(join(profileDir, `${name}.cpuprofile`), fn) : fn();
    for (let run = 1; run <= opts.runs; run++) {
      const groupBy = await timed(() => sqlGroupBy(db));
      const readAggregate = await profiled(run, 'read-aggregate', () => timed(() => readAndAggregate(db, head)));
      const product = await profiled(run, 'replay', () => timedReplay(db, 'sql'));
      const floor = await writeFloor(db);
      const fold = await timedReplay(db, 'fold');
      runs.push({ groupByMs: groupBy.ms, readAggregateMs: readAggregate.ms, readAggregatePeakRssMb: readAggregate.peakRssMb, foldReplayMs: fold.replayMs, writeFloorMs: floor.ms, writeFloorRows: floor.rows, ...product });
      const r = runs.at(-1) as RunResult;
      process.stderr.write(
        `run ${run}: replay ${rate(stored, r.replayMs)} ev/s | read+aggregate ${rate(stored, r.readAggregateMs)} ev/s | SQL GROUP BY ${rate(stored, r.groupByMs)} ev/s | fold's replay ${rate(stored, r.foldReplayMs)} ev/s | write floor ${rate(stored, r.writeFloorMs)} ev/s (${(r.writeFloorMs / 1000).toFixed(1)} s, ${r.writeFloorRows} rows) | phases ${JSON.stringify(r.phasesMs)}\n`,
      );
    }
    const summary = {
      benchmark: 'replay',
      events: stored,
      runs: runs.length,
      replayEventsPerSec: Math.round(median(runs.map((r) => rate(stored, r.replayMs)))),
      readAggregateEventsPerSec: Math.round(median(runs.map((r) => rate(stored, r.readAggregateMs)))),
      sqlGroupByEventsPerSec: Math.round(median(runs.map((r) => rate(stored, r.groupByMs)))),
      foldReplayEventsPerSec: Math.round(median(runs.map((r) => rate(stored, r.foldReplayMs)))),
      writeFloorEventsPerSec: Math.round(median(runs.map((r) => rate(stored, r.writeFloorMs)))),
      ratioToWriteFloor: Number(median(runs.map((r) => r.writeFloorMs / r.replayMs)).toFixed(2)),
      ratioToFoldReplay: Number(median(runs.map((r) => r.foldReplayMs / r.replayMs)).toFixed(2)),
      ratioToReadAggregate: Number(median(runs.map((r) => r.readAggregateMs / r.replayMs)).toFixed(2)),
      replayPeakRssMb: Math.round(Math.max(...runs.map((r) => r.peakRssMb))),
      rowsWritten: runs[0]?.rows ?? 0,
      phasesMsMedian: Object.fromEntries(
        Object.keys(runs[0]?.phasesMs ?? {}).map((p) => [p, Math.round(median(runs.map((r) => r.phasesMs[p as ReplayPhase] ?? 0)))]),
      ),
      source: sourceVersion(),
      server: await serverFacts(),
      perRun: runs,
    };
    printTable(summary);
    if (profileDir !== null) {
      for (const name of ['read-aggregate', 'replay']) console.log(`\n${formatProfileSummary(summarizeCpuProfile(join(profileDir, `${name}.cpuprofile`)))}`);
    }
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `replay-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`results: ${file}`);
    const replayRates = runs.map((r) => rate(stored, r.replayMs));
    await result.write({ events: stored, generated: count, runs: runs.length }, [
      { name: `replay: all ${PROJECTIONS.length} read models rebuilt`, unit: 'events/s', perRun: replayRates, baseline: { name: 'read + aggregate, no writes', perRun: runs.map((r) => rate(stored, r.readAggregateMs)) } },
      { name: `replay: all ${PROJECTIONS.length} read models rebuilt`, unit: 'events/s', perRun: replayRates, baseline: { name: 'one SQL GROUP BY over the log', perRun: runs.map((r) => rate(stored, r.groupByMs)) } },
      { name: `replay: all ${PROJECTIONS.length} read models rebuilt`, unit: 'events/s', perRun: replayRates, baseline: { name: "the fold's rebuild (REPLAY_ENGINE=fold)", perRun: runs.map((r) => rate(stored, r.foldReplayMs)) } },
      { name: `replay: all ${PROJECTIONS.length} read models rebuilt`, unit: 'events/s', perRun: replayRates, baseline: { name: 'write floor: the read models copied in, keys and indexes built, nothing computed', perRun: runs.map((r) => rate(stored, r.writeFloorMs)) } },
    ], [`replay peak RSS ${summary.replayPeakRssMb} MiB, ${summary.rowsWritten} read-model rows written`]);
  } finally {
    await close();
  }
}

interface RunResult {
  groupByMs: number;
  foldReplayMs: number;
  /** The write floor (replay/write-floor.ts): ms, and the rows it copied. */
  writeFloorMs: number;
  writeFloorRows: number;
  readAggregateMs: number;
  readAggregatePeakRssMb: number;
  replayMs: number;
  peakRssMb: number;
  rows: number;
  phasesMs: Partial<Record<ReplayPhase, number>>;
}

async function sqlGroupBy(db: Db): Promise<void> {
  await sql`
    SELECT api_key_id, campaign_id,
      count(DISTINCT message_id) FILTER (WHERE type IN ('queued', 'sent', 'deferred', 'bounce', 'blocked')) AS processed,
      count(DISTINCT message_id) FILTER (WHERE type = 'sent') AS delivered,
      count(DISTINCT message_id) FILTER (WHERE type = 'open') AS opened,
      count(DISTINCT message_id) FILTER (WHERE type = 'click') AS clicked,
      count(*) FILTER (WHERE type = 'open') AS open_events,
      count(*) FILTER (WHERE type = 'click') AS click_events
    FROM events GROUP BY api_key_id, campaign_id`.execute(db.kysely);
}

async function readAndAggregate(db: Db, head: bigint): Promise<void> {
  await foldLog(db, PROJECTIONS, head, { readBatch: 50_000 }, null);
}

async function timedReplay(db: Db, engine: 'sql' | 'fold'): Promise<{ replayMs: number; peakRssMb: number; rows: number; phasesMs: Partial<Record<ReplayPhase, number>> }> {
  const phasesMs: Partial<Record<ReplayPhase, number>> = {};
  let phase = null as ReplayPhase | null;
  let phaseStart = Date.now();
  const started = Date.now();
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 200);
  const report = await replay(db, PROJECTIONS, {
    readBatch: 50_000,
    catchUpBatch: 5000,
    engine,
    onProgress: (p) => {
      if (p.phase === phase) return;
      if (phase !== null) phasesMs[phase] = Date.now() - phaseStart;
      phase = p.phase;
      phaseStart = Date.now();
    },
  });
  if (phase !== null) phasesMs[phase] = Date.now() - phaseStart;
  clearInterval(sampler);
  return { replayMs: Date.now() - started, peakRssMb: peak / 2 ** 20, rows: report.rows, phasesMs };
}

async function timed(fn: () => Promise<void>): Promise<{ ms: number; peakRssMb: number }> {
  global.gc?.();
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 200);
  const started = Date.now();
  await fn();
  clearInterval(sampler);
  return { ms: Date.now() - started, peakRssMb: peak / 2 ** 20 };
}

const rate = (events: number, ms: number): number => Math.round((events * 1000) / Math.max(ms, 1));

let lastLine = 0;
function progressLine(text: string): void {
  if (Date.now() - lastLine < 2000) return;
  lastLine = Date.now();
  process.stderr.write(`${text}\n`);
}

function printTable(s: {
  events: number;
  replayEventsPerSec: number;
  readAggregateEventsPerSec: number;
  sqlGroupByEventsPerSec: number;
  foldReplayEventsPerSec: number;
  writeFloorEventsPerSec: number;
  ratioToWriteFloor: number;
  ratioToFoldReplay: number;
  ratioToReadAggregate: number; replayPeakRssMb: number; rowsWritten: number; phasesMsMedian: Record<string, number> }): void {
  console.log(`\nreplay of ${s.events} events (medians)`);
  console.table({
    'replay (all projections, with writes)': { 'events/s': s.replayEventsPerSec },
    'baseline: read + aggregate, no writes': { 'events/s': s.readAggregateEventsPerSec },
    'baseline: SQL GROUP BY': { 'events/s': s.sqlGroupByEventsPerSec },
    "the fold's rebuild (with writes)": { 'events/s': s.foldReplayEventsPerSec },
    'write floor: read models copied in, keys and indexes built': { 'events/s': s.writeFloorEventsPerSec },
  });
  console.log(`ratio replay / read+aggregate: ${s.ratioToReadAggregate} | replay / fold's rebuild: ${s.ratioToFoldReplay} | replay / write floor: ${s.ratioToWriteFloor} | rows written: ${s.rowsWritten} | peak RSS ${s.replayPeakRssMb} MiB | phases (ms): ${JSON.stringify(s.phasesMsMedian)}`);
}
