import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { cpus } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import pg from 'pg';
import { connectDb } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createApiKey } from '../src/keys/key-store.js';
import { natsOnly } from './ingest/nats-only.js';
import { preloadStream } from './ingest/preload.js';
import { runIngestProcess } from './ingest/product.js';
import { type CopyInput, buildCopyInput, countMismatches, createCopyTable, rawCopy } from './ingest/raw-copy.js';
import { RESULTS_DIR, type RunFigures, formatTable, median, rates, sourceVersion, writeResults } from './ingest/report.js';
import { Cleanup } from './support/cleanup.js';
import { type ProfileSummary, formatProfileSummary, summarizeCpuProfile } from './support/cpu-profile.js';
import { DEFAULT_TENANTS, generateEvents } from './support/generate.js';
import type { BenchOptions } from './support/options.js';
import { withMachineLoad } from './support/proc.js';
import { startResult } from './support/result.js';
import { type BenchStream, NATS_URL, type ScratchDatabase, createBenchStream, createScratchDatabase, randomSuffix, serverFacts } from './support/scratch.js';

/**
 * `bench ingest`: how fast the real ingest service drains a preloaded backlog into the log,
 * beside two same-run baselines: raw COPY of the same rows into a clone of the log table (the
 * Postgres limit) and a bare NATS consume + parse + ack (the broker limit). Each run gets a
 * fresh scratch database and fresh consumers on one preloaded stream.
 */

const SEED = 20_261_121;
const log = (msg: string) => process.stderr.write(`[ingest bench] ${msg}\n`);
const perSec = (n: number, ms: number) => `${((n * 1000) / ms / 1000).toFixed(1)}k/s`;

interface Context {
  cleanup: Cleanup;
  nc: NatsConnection;
  stream: BenchStream;
  events: number;
  tenants: readonly string[];
  input: CopyInput;
  profileDir: string | null;
  suffix: string;
}

/** A migrated scratch database with one API key per tenant; returns the APIKeyIDs created. */
async function prepareDatabase(cleanup: Cleanup): Promise<{ db: ScratchDatabase; drop: () => Promise<void>; tenants: string[] }> {
  const db = await createScratchDatabase();
  const drop = cleanup.add(`drop database ${db.name}`, db.drop);
  const conn = await connectDb({ kind: 'postgres', url: db.url, poolSize: 2 });
  try {
    await migrateToLatest(conn.kysely);
    const tenants: string[] = [];
    for (let i = 0; i < DEFAULT_TENANTS.length; i++) tenants.push((await createApiKey(conn.kysely)).APIKeyID);
    return { db, drop, tenants };
  } finally {
    await conn.close();
  }
}

async function oneRun(ctx: Context, run: number, prepared: Awaited<ReturnType<typeof prepareDatabase>>): Promise<RunFigures> {
  const { db, drop } = prepared;
  if (prepared.tenants.join() !== ctx.tenants.join()) throw new Error(`run ${run}: API keys ${prepared.tenants.join()} are not the backlog's ${ctx.tenants.join()}`);
  const client = new pg.Client({ connectionString: db.url });
  client.on('error', () => {}); // the scratch database may be dropped under it (Ctrl-C)
  await client.connect();
  try {
    await createCopyTable(client);
    await client.query('CHECKPOINT');
    const copy = await withMachineLoad(async () => ({ ms: await rawCopy(client, ctx.input.batches) }));
    const copyMs = copy.ms;
    log(`run ${run}: raw COPY ${ctx.input.rows} rows in ${(copyMs / 1000).toFixed(2)} s (${perSec(ctx.input.rows, copyMs)})`);

    const nats = await withMachineLoad(() => natsOnly(ctx.nc, ctx.stream.stream, ctx.stream.subjectPrefix, ctx.events, `bench_nats_${ctx.suffix}_${run}`));
    log(`run ${run}: NATS only ${nats.received} msgs in ${(nats.ms / 1000).toFixed(2)} s (${perSec(nats.received, nats.ms)}), ack pending ${nats.ackPending}`);

    await client.query('CHECKPOINT');
    const consumer = `bench_ingest_${ctx.suffix}_${run}`;
    const jsm = await jetstreamManager(ctx.nc);
    const dropConsumer = ctx.cleanup.add(`delete consumer ${consumer}`, () => jsm.consumers.delete(ctx.stream.stream, consumer).then(() => undefined));
    const dir = ctx.profileDir !== null ? `${ctx.profileDir}/run-${run}` : null;
    if (dir !== null) mkdirSync(dir, { recursive: true });
    const source = sourceVersion();
    const ingest = await runIngestProcess({
      databaseUrl: db.url,
      stream: ctx.stream.stream,
      subjectPrefix: ctx.stream.subjectPrefix,
      consumer,
      expected: ctx.input.rows,
      nodeArgs: dir !== null ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [],
      stallTimeoutMs: 120_000,
      cleanup: ctx.cleanup,
    });
    await dropConsumer();
    const mismatches = await countMismatches(client);
    log(
      `run ${run}: ingest ${ingest.stored} rows in ${(ingest.ms / 1000).toFixed(2)} s (${perSec(ctx.events, ingest.ms)} events, ${perSec(ingest.stored, ingest.ms)} rows), ` +
        `${ingest.deadLetters} dead letters, ${mismatches} mismatches vs COPY, ${ingest.rollbacks} rollbacks, peak RSS ${((ingest.peakRssKb ?? 0) / 1024).toFixed(0)} MiB (${source.commit}${source.uncommitted.length > 0 ? '+changes' : ''})`,
    );
    if (ingest.output.length > 0) log(`run ${run}: the ingest process logged:\n  ${ingest.output.slice(0, 10).join('\n  ')}`);
    if (ingest.stored !== ctx.input.rows || ingest.distinct !== ctx.input.rows || ingest.deadLetters !== 0 || mismatches !== 0) {
      log(`run ${run}: VERIFICATION FAILED: stored ${ingest.stored}, distinct ${ingest.distinct}, expected ${ctx.input.rows}, dead letters ${ingest.deadLetters}, mismatches ${mismatches}`);
      process.exitCode = 1;
    }
    return { rawCopy: { ms: copyMs, rows: ctx.input.rows, machine: copy.machine }, natsOnly: nats, ingest: { ...ingest, mismatches, source } };
  } finally {
    await client.end();
    await drop();
  }
}

/** The main thread's profile (the largest file the run wrote), cut to the drain. */
function summarizeProfile(dir: string, t: RunFigures['ingest']['times']): ProfileSummary | null {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => `${dir}/${f}`);
  const main = files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return main !== undefined ? summarizeCpuProfile(main, { fromMsBeforeEnd: t.exitAt - t.firstAt, toMsBeforeEnd: t.exitAt - t.doneAt }) : null;
}

export async function runIngestBench(opts: BenchOptions): Promise<void> {
  const events = opts.events ?? 1_000_000;
  // BENCH_DUPLICATES=near: duplicates close behind their originals (see generate.ts).
  const duplicates = process.env['BENCH_DUPLICATES'] === 'near' ? 'near' : 'far';
  const startedAt = new Date();
  const result = await startResult('ingest');
  const source = sourceVersion();
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  try {
    const first = await prepareDatabase(cleanup);
    const nc = await connect({ servers: NATS_URL, name: 'mailtally-bench' });
    cleanup.add('close NATS', () => nc.close());
    const stream = await createBenchStream(await jetstreamManager(nc));
    cleanup.add(`delete stream ${stream.stream}`, stream.delete);
    const generate = () => generateEvents({ count: events, seed: SEED, tenants: first.tenants, duplicates });

    log(`preloading ${events} events (${duplicates} duplicates) into ${stream.stream} (${stream.subjectPrefix}.>)`);
    const pre = await preloadStream(jetstream(nc), stream.subjectPrefix, generate(), events);
    log(`preloaded in ${(pre.ms / 1000).toFixed(1)} s (${perSec(events, pre.ms)}, avg ${(pre.bytes / events).toFixed(0)} B/event); not counted`);
    const input = buildCopyInput(generate(), pre.seqs);
    log(`decoded ${events} events (${input.rows} distinct, ${input.duplicates} duplicates); decodeEventText alone: ${perSec(events, input.decodeMs)} on one thread`);

    const profileDir = opts.profile ? `${RESULTS_DIR}profiles/ingest-${startedAt.toISOString().replace(/[:.]/g, '-')}` : null;
    const ctx: Context = { cleanup, nc, stream, events, tenants: first.tenants, input, profileDir, suffix: randomSuffix() };
    const runs: RunFigures[] = [];
    for (let run = 1; run <= opts.runs; run++) runs.push(await oneRun(ctx, run, run === 1 ? first : await prepareDatabase(cleanup)));

    const table = formatTable(runs, events);
    const firstRun = runs[0];
    const profile = profileDir !== null && firstRun !== undefined ? summarizeProfile(`${profileDir}/run-1`, firstRun.ingest.times) : null;
    const r = rates(runs, events);
    const path = writeResults('ingest', startedAt, {
      bench: 'ingest',
      startedAt: startedAt.toISOString(),
      source,
      host: { cpus: cpus().length, node: process.version, postgres: await serverFacts(), profiled: opts.profile },
      ingestEnv: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('INGEST_') || k === 'PG_POOL_SIZE')),
      params: { events, runs: opts.runs, seed: SEED, duplicatePlacement: duplicates, distinct: input.rows, duplicates: input.duplicates, avgEventBytes: pre.bytes / events, copyBatchRows: 10_000 },
      preload: { ms: pre.ms, eventsPerSec: (events * 1000) / pre.ms },
      decodeOnly: { ms: input.decodeMs, eventsPerSec: (events * 1000) / input.decodeMs },
      rates: r,
      medians: {
        rawCopyRowsPerSec: median(r.rawCopyRowsPerSec),
        natsOnlyMsgsPerSec: median(r.natsOnlyMsgsPerSec),
        ingestEventsPerSec: median(r.ingestEventsPerSec),
        ingestRowsPerSec: median(r.ingestRowsPerSec),
        ingestToRawCopy: median(r.ingestRowsPerSec) / median(r.rawCopyRowsPerSec),
      },
      runs,
      profile,
    });
    const env = Object.entries(process.env).filter(([k]) => k.startsWith('INGEST_') || k === 'PG_POOL_SIZE');
    const dirty = `${source.uncommitted.length > 0 ? ` + uncommitted changes (${source.uncommitted.length} files)` : ''}${env.map(([k, v]) => ` ${k}=${v ?? ''}`).join('')}`;
    console.log(`\ningest @ ${source.commit}${dirty}: ${events} events (${input.rows} distinct), ${opts.runs} run(s)${opts.profile ? ', ingest under --cpu-prof' : ''}\n${table}`);
    console.log(`decodeEventText alone (bench process, one thread): ${perSec(events, input.decodeMs)}`);
    if (profile !== null) console.log(`\n${formatProfileSummary(profile)}`);
    console.log(`\nresults: ${path}`);
    await result.write({ events, distinct: input.rows, runs: opts.runs, duplicatePlacement: duplicates }, [
      { name: 'ingest (one worker), stored rows/s', unit: 'rows/s', perRun: r.ingestRowsPerSec, baseline: { name: 'raw COPY of the same rows', perRun: r.rawCopyRowsPerSec } },
      { name: 'ingest (one worker), events/s incl. duplicates', unit: 'events/s', perRun: r.ingestEventsPerSec, baseline: { name: 'NATS consume + ack only', perRun: r.natsOnlyMsgsPerSec } },
    ], [`ingest peak RSS ${Math.round(Math.max(...runs.map((x) => x.ingest.peakRssKb ?? 0)) / 1024)} MiB; ${runs.reduce((n, x) => n + x.ingest.mismatches, 0)} mismatches vs COPY`]);
  } catch (err) {
    if (!cleanup.interrupted) throw err;
  } finally {
    offSignals();
    await cleanup.runAll();
  }
}
