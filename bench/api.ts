import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import { PROJECTIONS } from '../projections/index.js';
import { connectDb } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createApiKey } from '../src/keys/key-store.js';
import { replay } from '../src/projector/replay.js';
import { ensureProjectionTables } from '../src/projector/tables.js';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { loadLog } from './replay/load-log.js';
import type { BenchOptions } from './support/options.js';
import { startResult } from './support/result.js';
import { createScratchDatabase, serverFacts } from './support/scratch.js';
import { mailtallyArgv } from './support/service.js';

/**
 * `npm run bench -- api`: the read API over a realistic log (default 1M events over 30 days,
 * six tenants), served by `mailtally serve --roles api` in its own process and loaded by
 * autocannon from this one. Baseline, same server, same run: `GET /healthz`, a bare route
 * answering a constant. For each query: requests/s and p50/p99 at full load (32 connections),
 * then p50/p99 at a moderate fixed rate (a quarter of the bare route's full-load rate, at most
 * 1000 req/s). Three server settings: response cache on with read models at rest, cache on while
 * a checkpoint moves every 100 ms (each move drops every cached answer, as a projector batch
 * does), and cache off. Medians over `runs`.
 */
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DAY = 86_400;
const FULL_LOAD_SECONDS = 6;
const MODERATE_SECONDS = 6;

interface Figures { rps: number; p50: number; p99: number; errors: number }
interface QueryResult { name: string; path: string; full: Figures; moderate: Figures }

export async function runApiBench(opts: BenchOptions): Promise<void> {
  const count = opts.events ?? 1_000_000;
  const result = await startResult('api');
  const scratch = await createScratchDatabase('mt_bench_api');
  const db = await connectDb({ kind: 'postgres', url: scratch.url, poolSize: 4 }, { application: 'mailtally:bench' });
  let child: ChildProcess | null = null;
  try {
    await migrateToLatest(db.kysely);
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    // Six tenants: keys 1..6 are the generator's APIKeyIDs.
    const keys = [];
    for (let i = 0; i < 6; i++) keys.push(await createApiKey(db.kysely));
    const key = keys[0]!;
    // ~4 events a message: spread the messages over 30 days.
    const stored = await loadLog(db, count, (done) => progress(`loading log ${done}/${count}`), { secondsPerMessage: (30 * DAY) / (count / 4) });
    progress(`replaying ${stored} events into the read models…`);
    await replay(db, PROJECTIONS, { readBatch: 50_000, catchUpBatch: 2000 });
    await sql`VACUUM ANALYZE`.execute(db.kysely);
    const span = await sql<{ lo: bigint; hi: bigint }>`SELECT min(event_time) AS lo, max(event_time) AS hi FROM events`.execute(db.kysely);
    const lo = Number(span.rows[0]!.lo);
    const hi = Number(span.rows[0]!.hi);
    const top = await sql<{ campaign_id: bigint }>`
      SELECT campaign_id FROM link_clicks WHERE api_key_id = ${key.APIKeyID}::int8 GROUP BY 1 ORDER BY sum(clicked_events) DESC LIMIT 1`.execute(db.kysely);
    const campaign = String(top.rows[0]?.campaign_id ?? 0);
    process.stderr.write(`\nlog: ${stored} events, ${((hi - lo) / DAY).toFixed(1)} days; tenant ${key.APIKeyID}, campaign ${campaign}\n`);

    const auth = `Basic ${Buffer.from(`${key.ApiKey}:${key.SecretKey}`).toString('base64')}`;
    const results: Record<Mode, QueryResult[][]> = { cached: [], 'cached, read models changing 10×/s': [], uncached: [] };
    let queries: [string, string][] = [];
    for (const mode of MODES) {
      const port = 20_000 + Math.floor(Math.random() * 20_000);
      child = spawn(process.execPath, mailtallyArgv(['serve', '--roles', 'api']), {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: scratch.url, PORT: String(port), LOG_LEVEL: 'warn', API_RATE_LIMIT: '0', API_CACHE_ENTRIES: mode === 'uncached' ? '0' : '10000', NODE_OPTIONS: '' },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const base = `http://127.0.0.1:${port}`;
      await waitUntilUp(`${base}/healthz`);
      if (queries.length === 0) queries = await benchQueries(base, auth, key.APIKeyID, campaign, hi);
      // A projector commit moves a checkpoint, whose trigger tells every API process to drop its cache.
      const changes =
        mode === 'uncached' || mode === 'cached'
          ? null
          : setInterval(() => void sql`UPDATE checkpoints SET updated_at = now() WHERE name = 'statcounters'`.execute(db.kysely).catch(() => {}), 100);
      for (let run = 1; run <= opts.runs; run++) {
        const runResults: QueryResult[] = [];
        let moderateRate = 0;
        for (const [name, path] of queries) {
          const full = await load(`${base}${path}`, auth, { connections: 32, duration: FULL_LOAD_SECONDS });
          if (moderateRate === 0) moderateRate = Math.min(1000, Math.round(full.rps / 4));
          const moderate = await load(`${base}${path}`, auth, { connections: 8, duration: MODERATE_SECONDS, overallRate: moderateRate });
          runResults.push({ name, path, full, moderate });
          process.stderr.write(`${mode} run ${run} ${name}: ${full.rps} req/s p50 ${full.p50} p99 ${full.p99} ms | at ${moderateRate}/s p50 ${moderate.p50} p99 ${moderate.p99} ms\n`);
        }
        results[mode].push(runResults);
      }
      if (changes !== null) clearInterval(changes);
      await stop(child);
      child = null;
    }

    const summary = Object.fromEntries(MODES.map((mode) => [mode, summarize(queries, results[mode])]));
    for (const mode of MODES) {
      const title: Record<Mode, string> = {
        cached: 'response cache on (the default), read models unchanged during the run',
        'cached, read models changing 10×/s': 'response cache on, a checkpoint moved every 100 ms (every cached answer dropped 10 times a second)',
        uncached: 'response cache off (API_CACHE_ENTRIES=0): every request reads the database',
      };
      console.log(`\n${title[mode]}`);
      printTable(summary[mode] ?? []);
    }
    const file = join(RESULTS_DIR, `api-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(file, `${JSON.stringify({ benchmark: 'api', events: stored, runs: opts.runs, summary, source: sourceVersion(), server: await serverFacts(), perRun: results }, null, 2)}\n`);
    console.log(`results: ${file}`);
    await result.write(
      { events: stored, runs: opts.runs, connections: 32, seconds: FULL_LOAD_SECONDS },
      MODES.flatMap((mode) =>
        queries.slice(1).map(([name], i) => {
          const s = summary[mode]?.[i + 1];
          return {
            name: `${name} (${mode})`,
            unit: 'req/s',
            perRun: results[mode].map((run) => run[i + 1]?.full.rps ?? NaN),
            baseline: { name: 'GET /healthz, same server', perRun: results[mode].map((run) => run[0]?.full.rps ?? NaN) },
            note:
              s !== undefined
                ? `p50 ${s.p50Ms} / p99 ${s.p99Ms} ms at full load; p50 ${s.moderateP50Ms} / p99 ${s.moderateP99Ms} ms at a moderate rate (¼ of the bare route's, ≤ 1000/s; the bare route's own p99 there: ${summary[mode]?.[0]?.moderateP99Ms ?? '?'} ms); ${s.errors} errors`
                : '',
          };
        }),
      ),
    );
  } finally {
    if (child !== null) await stop(child);
    await db.close();
    await scratch.drop();
  }
}

type Mode = (typeof MODES)[number];
const MODES = ['cached', 'cached, read models changing 10×/s', 'uncached'] as const;

async function benchQueries(base: string, auth: string, tenant: string, campaign: string, hi: number): Promise<[string, string][]> {
  const clicks = (await (await fetch(`${base}/v3/REST/clickstatistics?countOnly=1`, { headers: { authorization: auth } })).json()) as { Total?: number };
  const deepOffset = Math.max(0, Math.floor((clicks.Total ?? 0) * 0.9) - 100);
  const queries: [string, string][] = [
    ['bare route (baseline)', '/healthz'],
    ['statcounters Lifetime', '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime'],
    ['statcounters Day, 30 days', `/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Event&CounterResolution=Day&FromTS=${hi - 30 * DAY}&ToTS=${hi + 1}&Limit=31`],
    ['statcounters Hour, 7 days', `/v3/REST/statcounters?CounterSource=Campaign&SourceID=${campaign}&CounterTiming=Event&CounterResolution=Hour&FromTS=${hi - 7 * DAY}&ToTS=${hi + 1}&Limit=168`],
    ['toplinkclicked', `/v3/REST/toplinkclicked?CampaignID=${campaign}&Limit=10`],
    [`clickstatistics Offset ${deepOffset}`, `/v3/REST/clickstatistics?Limit=100&Offset=${deepOffset}`],
  ];
  for (const [name, path] of queries) {
    const res = await fetch(`${base}${path}`, { headers: { authorization: auth } });
    if (res.status !== 200) throw new Error(`${name} (tenant ${tenant}): ${res.status} ${await res.text()}`);
  }
  return queries;
}

function summarize(queries: readonly [string, string][], runs: readonly QueryResult[][]) {
  return queries.map(([name, path], i) => {
    const of = (pick: (r: QueryResult) => number) => median(runs.map((r) => pick(r[i]!)));
    return {
      name,
      path,
      rps: Math.round(of((r) => r.full.rps)),
      p50Ms: of((r) => r.full.p50),
      p99Ms: of((r) => r.full.p99),
      moderateP50Ms: of((r) => r.moderate.p50),
      moderateP99Ms: of((r) => r.moderate.p99),
      errors: runs.reduce((s, r) => s + r[i]!.full.errors + r[i]!.moderate.errors, 0),
    };
  });
}

function printTable(rows: ReturnType<typeof summarize>): void {
  const bare = rows[0]?.rps ?? 1;
  console.log('query                          req/s   ratio  p50 ms  p99 ms | moderate p50  p99 ms  errors');
  for (const s of rows) {
    console.log(
      `${s.name.padEnd(30)} ${String(s.rps).padStart(6)}  ${(s.rps / bare).toFixed(2).padStart(5)}  ${s.p50Ms.toFixed(1).padStart(6)}  ${s.p99Ms.toFixed(1).padStart(6)} | ${s.moderateP50Ms.toFixed(1).padStart(12)}  ${s.moderateP99Ms.toFixed(1).padStart(6)}  ${s.errors}`,
    );
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

async function load(url: string, auth: string, o: { connections: number; duration: number; overallRate?: number }): Promise<Figures> {
  const r = await autocannon({ url, connections: o.connections, duration: o.duration, headers: { authorization: auth }, ...(o.overallRate !== undefined ? { overallRate: o.overallRate } : {}) });
  return { rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

async function waitUntilUp(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the API did not come up at ${url}`);
}

const progress = (line: string) => process.stderr.write(`\r${line}`);
