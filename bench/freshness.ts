import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import hdr from 'hdr-histogram-js';
import pg from 'pg';
import { PROJECTIONS } from '../projections/index.js';
import { connectDb } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createApiKey } from '../src/keys/key-store.js';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { loadLog } from './replay/load-log.js';
import { Cleanup } from './support/cleanup.js';
import { mailtallyArgv } from './support/service.js';
import { formatProfileSummary, type ProfileSummary, summarizeCpuProfile } from './support/cpu-profile.js';
import { DEFAULT_TENANTS, generateEvents } from './support/generate.js';
import type { BenchOptions } from './support/options.js';
import { cpuMs, machineLoad, pidsNamed, sampleMachine } from './support/proc.js';
import { freshnessFigures } from './freshness/figures.js';
import { startResult } from './support/result.js';
import { createBenchStream, createScratchDatabase, NATS_URL } from './support/scratch.js';

/**
 * `npm run bench -- freshness`: the service (ingest + projector, one process) against real NATS
 * and Postgres; realistic traffic published at a steady 1k, 5k and 20k events/s; among it, probe
 * messages (a `sent` for a new message of a dedicated tenant, 50 a second). For each probe:
 * publish → stored in the log (its row's recorded_at) and publish → visible in the `messages`
 * read model. Same-run baseline: NATS publish → ack round trip alone.
 *
 * The publisher shares the machine with what it measures, so it does as little as it can: the
 * background traffic is generated and encoded before the clock starts and published without
 * waiting for each ack (JetStream stores it all the same, deduplicating by Nats-Msg-Id); the
 * probes are JetStream publishes with acks (the baseline). Visibility is checked when the read
 * models announce a commit (`NOTIFY mailtally_read_models`, as the API's cache hears it), and
 * every 20 ms in case a notification is missed.
 * Per run it also reports where the CPU went while publishing (the service process, the
 * database's Postgres backends, nats-server, this process: publisher and poller) and how busy
 * the machine was, other work on it included. `--profile` writes a CPU profile of the service
 * and summarizes the first run's measured window. FRESHNESS_RATES (e.g. `5000`) and
 * FRESHNESS_SECONDS narrow a run while iterating.
 * Each run first publishes at its rate for a warm-up whose probes are not counted: the figures
 * are the steady state, not the service's first seconds (code not yet optimized by the JIT, an
 * empty group cache, pools still opening) nor the backlog those seconds leave, which on a slow
 * machine can take seconds more to clear. The warm-up lasts FRESHNESS_WARMUP_SECONDS (default
 * 3) and until, for a second, every probe published more than 100 ms before is visible, at most
 * FRESHNESS_WARMUP_MAX_SECONDS (default 8; a rate the service cannot keep up with reaches it).
 * Its length and p99 are reported apart (`warm-up`), so a slow start stays visible.
 * FRESHNESS_PREFILL (default 0) puts that many events (another seed's) in the log before the
 * service starts, waits for the projector to fold them, then analyzes the database: the service
 * is measured over a log it has already worked through, with the statistics autovacuum keeps in
 * production, instead of a new database's empty log without any.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RATES = process.env['FRESHNESS_RATES'] !== undefined ? process.env['FRESHNESS_RATES'].split(',').map(Number) : [1000, 5000, 20_000];
const PROBES_PER_SEC = 50;
const DURATION_S = Number(process.env['FRESHNESS_SECONDS'] ?? 15);
const WARMUP_S = Number(process.env['FRESHNESS_WARMUP_SECONDS'] ?? 3);
/** The warm-up also lasts until the oldest probe not yet visible is younger than this… */
const CAUGHT_UP_MS = 100;
/** …at every look (four a second) for this long… */
const KEEPING_UP_MS = 1000;
/** …but no longer than this: the window then starts anyway, and the run says so. */
const WARMUP_MAX_S = Math.max(WARMUP_S, Number(process.env['FRESHNESS_WARMUP_MAX_SECONDS'] ?? 8));
const PREFILL = Number(process.env['FRESHNESS_PREFILL'] ?? 0);

export async function runFreshnessBench(opts: BenchOptions): Promise<void> {
  const seconds = DURATION_S;
  const result = await startResult('freshness');
  const cleanup = new Cleanup();
  const onSignal = () => void cleanup.runAll().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const profiles: Record<string, ProfileSummary | null> = {};
  try {
    const results = [];
    for (const rate of RATES) {
      const perRun = [];
      for (let run = 1; run <= opts.runs; run++) {
        const profileDir = opts.profile && run === 1 ? join(RESULTS_DIR, 'profiles', `freshness-${stamp}`, `${rate}`) : null;
        const r = await oneRun(cleanup, rate, seconds, profileDir);
        perRun.push(r);
        if (profileDir !== null) profiles[`${rate}/s`] = summarizeProfile(profileDir, r.window);
        const cpu = r.cpu;
        process.stderr.write(
          `${rate}/s run ${run}: visible p50 ${r.visible.p50} ms p99 ${r.visible.p99} ms max ${r.visible.max} (warm-up ${r.warmup.seconds} s${r.warmup.caughtUp ? '' : ', backlog not cleared'}, its p99 ${r.warmupVisible.p99}) | stored p50 ${r.stored.p50} p99 ${r.stored.p99} | NATS ack p50 ${r.natsAck.p50} p99 ${r.natsAck.p99} | achieved ${r.achievedRate}/s` +
            ` | CPU (cores) service ${cpu.service} postgres ${cpu.postgres} nats ${cpu.nats} publisher ${cpu.publisher}, machine busy ${cpu.machineBusy} pressure ${cpu.cpuPressure}\n`,
        );
      }
      results.push({
        rate,
        visibleP50: median(perRun.map((r) => r.visible.p50)),
        visibleP99: median(perRun.map((r) => r.visible.p99)),
        storedP50: median(perRun.map((r) => r.stored.p50)),
        storedP99: median(perRun.map((r) => r.stored.p99)),
        natsAckP50: median(perRun.map((r) => r.natsAck.p50)),
        natsAckP99: median(perRun.map((r) => r.natsAck.p99)),
        warmupVisibleP99: median(perRun.map((r) => r.warmupVisible.p99)),
        achievedRate: median(perRun.map((r) => r.achievedRate)),
        serviceCores: median(perRun.map((r) => r.cpu.service)),
        postgresCores: median(perRun.map((r) => r.cpu.postgres)),
        machineBusy: median(perRun.map((r) => r.cpu.machineBusy)),
        perRun,
      });
    }
    console.log(`\nfreshness: publish → visible in the read model (ms, medians of ${opts.runs} runs of ${seconds} s after a warm-up of at least ${WARMUP_S} s)`);
    console.table(
      Object.fromEntries(
        results.map((r) => [
          `${r.rate}/s`,
          { 'visible p50': r.visibleP50, 'visible p99': r.visibleP99, 'in log p50': r.storedP50, 'in log p99': r.storedP99, 'baseline NATS ack p50': r.natsAckP50, 'baseline NATS ack p99': r.natsAckP99, 'warm-up visible p99': r.warmupVisibleP99, 'achieved/s': r.achievedRate, 'service cores': r.serviceCores, 'postgres cores': r.postgresCores, 'machine busy': r.machineBusy },
        ]),
      ),
    );
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `freshness-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify({ benchmark: 'freshness', seconds, source: sourceVersion(), results, profiles }, null, 2)}\n`);
    for (const [rate, profile] of Object.entries(profiles)) if (profile !== null) console.log(`\n${rate}: ${formatProfileSummary(profile)}`);
    console.log(`results: ${file}`);
    await result.write({ rates: RATES, seconds, warmupSeconds: WARMUP_S, warmupMaxSeconds: WARMUP_MAX_S, runs: opts.runs }, freshnessFigures(results));
  } finally {
    process.off('SIGINT', onSignal);
    await cleanup.runAll();
  }
}

interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

/** The service's main-thread profile (the largest file), cut to the publishing window. */
function summarizeProfile(dir: string, window: { fromMsBeforeEnd: number; toMsBeforeEnd: number }): ProfileSummary | null {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(dir, f));
  const main = files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return main !== undefined ? summarizeCpuProfile(main, window) : null;
}

/** CPU time of the processes that share the machine during a run (ms so far); Postgres: the backends of the run's database. */
async function cpuSnapshot(servicePid: number, poll: pg.Client) {
  const { rows } = await poll.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const postgres = rows.map((r) => r.pid);
  const nats = pidsNamed('nats-server');
  const self = process.cpuUsage();
  return {
    service: cpuMs(servicePid),
    postgres: new Map(postgres.map((pid) => [pid, cpuMs(pid)])),
    nats: nats.reduce((sum, pid) => sum + cpuMs(pid), 0),
    publisher: (self.user + self.system) / 1000,
    machine: sampleMachine(),
  };
}

type CpuSnapshot = Awaited<ReturnType<typeof cpuSnapshot>>;

function cpuUsed(from: CpuSnapshot, to: CpuSnapshot, wallMs: number) {
  let postgres = 0;
  for (const [pid, ms] of to.postgres) postgres += ms - (from.postgres.get(pid) ?? 0);
  const cores = (ms: number) => Math.round((ms / wallMs) * 100) / 100;
  const load = machineLoad(from.machine, to.machine);
  return {
    service: cores(to.service - from.service),
    postgres: cores(postgres),
    nats: cores(to.nats - from.nats),
    publisher: cores(to.publisher - from.publisher),
    machineBusy: Math.round(load.busy * 100) / 100,
    cpuPressure: Math.round(load.cpuPressure * 100) / 100,
  };
}

async function oneRun(cleanup: Cleanup, rate: number, seconds: number, profileDir: string | null) {
  const scratch = await createScratchDatabase('mt_bench_fresh');
  const dropDb = cleanup.add('scratch database', () => scratch.drop());
  const db = await connectDb({ kind: 'postgres', url: scratch.url, poolSize: 2 });
  await migrateToLatest(db.kysely);
  for (let i = 0; i <= DEFAULT_TENANTS.length; i++) await createApiKey(db.kysely);
  const probeTenant = String(DEFAULT_TENANTS.length + 1);
  // Another seed than the published traffic's: other event ids, so none is dropped as a duplicate.
  if (PREFILL > 0) await loadLog(db, PREFILL, () => {}, { seed: 7, duplicateRate: 0 });
  await db.close();

  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const stream = await createBenchStream(jsm);
  const dropStream = cleanup.add('stream', () => stream.delete());
  if (profileDir !== null) mkdirSync(profileDir, { recursive: true });
  const child = startService(scratch.url, stream.stream, stream.subjectPrefix, profileDir);
  const stopChild = cleanup.add('service', () => stopProcess(child));

  const poll = new pg.Client({ connectionString: scratch.url });
  await poll.connect();
  let pollOpen = true;
  try {
    await waitForProjector(poll);
    if (PREFILL > 0) await foldedAndAnalyzed(poll);
    const js = jetstream(nc);
    const background = pregenerate(rate * (WARMUP_MAX_S + seconds + 5), stream.subjectPrefix);
    let nextBackground = 0;
    const publishedAt = new Map<string, number>();
    const probePublishTimes = new Map<number, number>();
    const visible = hdr.build();
    const warmupVisible = hdr.build();
    const stored = hdr.build();
    const natsAck = hdr.build();
    let probeSeq = 0;
    let published = 0;
    const started = performance.now();
    // Probes published before `measured` (set when the warm-up ends) are the warm-up's: counted apart.
    let measured = Number.POSITIVE_INFINITY;
    let end = Number.POSITIVE_INFINITY;
    let caughtUp = false;
    let keepingUpSince: number | null = null;
    // Looks start a second early, so a service that keeps up ends its warm-up at WARMUP_S.
    let nextCheck = started + Math.max(0, WARMUP_S * 1000 - KEEPING_UP_MS);
    let publishedBefore = 0;
    const inflight = new Set<Promise<unknown>>();
    let nextProbeAt = started;
    let pending: string[] = [];
    let cpuBefore: Awaited<ReturnType<typeof cpuSnapshot>> | null = null;

    // Visibility: checked on each read-model commit notification, and every 20 ms regardless.
    let changed: () => void = () => {};
    await poll.query('LISTEN mailtally_read_models');
    poll.on('notification', () => changed());
    const poller = (async () => {
      while (performance.now() < end + 10_000 && (performance.now() < end || publishedAt.size > 0)) {
        const wake = new Promise<void>((r) => {
          changed = r;
          setTimeout(r, 20);
        });
        if (pending.length > 0) {
          const { rows } = await poll.query<{ m: string }>({ name: 'probe', text: 'SELECT message_id::text AS m FROM messages WHERE api_key_id = $1 AND message_id = ANY($2::numeric[])', values: [probeTenant, pending] });
          const now = performance.now();
          const seen = new Set(rows.map((r) => r.m));
          for (const m of seen) {
            const t = publishedAt.get(m);
            if (t !== undefined) (t < measured ? warmupVisible : visible).recordValue(Math.max(1, Math.round(now - t)));
            publishedAt.delete(m);
          }
          pending = pending.filter((m) => !seen.has(m));
        }
        await wake;
      }
    })();

    while (performance.now() < end) {
      const tickStart = performance.now();
      if (measured === Number.POSITIVE_INFINITY && tickStart >= nextCheck) {
        // The oldest probe still waiting to be seen (the map keeps publishing order).
        // Probes turn visible a batch at a time, so one look right after a commit can find
        // nothing old pending even while the service is still behind: it must hold for a second.
        const oldest = publishedAt.values().next();
        const behindMs = oldest.done === true ? 0 : tickStart - oldest.value;
        if (behindMs > CAUGHT_UP_MS) keepingUpSince = null;
        else keepingUpSince ??= tickStart;
        caughtUp = keepingUpSince !== null && tickStart - keepingUpSince >= KEEPING_UP_MS;
        if ((caughtUp && tickStart - started >= WARMUP_S * 1000) || tickStart - started >= WARMUP_MAX_S * 1000) {
          measured = tickStart;
          end = measured + seconds * 1000;
        } else {
          nextCheck = tickStart + 250;
        }
      }
      if (cpuBefore === null && tickStart >= measured) {
        cpuBefore = await cpuSnapshot(child.pid ?? 0, poll);
        publishedBefore = published;
      }
      const due = Math.floor(((tickStart - started) / 1000) * rate) - published;
      for (let i = 0; i < due && nextBackground < background.length; i++) {
        const g = background[nextBackground++] as Pregenerated;
        nc.publish(g.subject, g.data, { headers: g.headers });
        published += 1;
      }
      while (performance.now() >= nextProbeAt && nextProbeAt < end) {
        nextProbeAt += 1000 / PROBES_PER_SEC;
        const messageId = String(9_000_000_000_000_000_000n + BigInt(++probeSeq));
        const body = JSON.stringify({ event: 'sent', time: Math.floor(Date.now() / 1000), MessageID: messageId, email: `probe${probeSeq}@example.com`, mj_campaign_id: 1 });
        const t0 = performance.now();
        publishedAt.set(messageId, t0);
        probePublishTimes.set(probeSeq, t0);
        pending.push(messageId);
        const p = js.publish(`${stream.subjectPrefix}.${probeTenant}.sent`, body, { msgID: `probe-${probeSeq}` }).then(() => {
          if (t0 >= measured) natsAck.recordValue(Math.max(1, Math.round(performance.now() - t0)));
        });
        track(inflight, p);
      }
      if (inflight.size > 20_000) await Promise.race(inflight);
      await new Promise((r) => setTimeout(r, 1));
    }
    const publishedFor = performance.now() - measured;
    const achievedRate = Math.round((published - publishedBefore) / (publishedFor / 1000));
    if (cpuBefore === null) throw new Error('the warm-up never ended');
    const cpu = cpuUsed(cpuBefore, await cpuSnapshot(child.pid ?? 0, poll), publishedFor);
    const publishingEndedAt = performance.now();
    await Promise.all(inflight);
    await poller;
    // publish → row stored: the probe rows' transaction time against their publish time.
    const { rows } = await poll.query<{ m: string; at: string }>(
      "SELECT message_id::text AS m, (extract(epoch FROM recorded_at) * 1000)::text AS at FROM events WHERE api_key_id = $1 AND type = 'sent'",
      [probeTenant],
    );
    const offset = Date.now() - performance.now();
    for (const r of rows) {
      const seq = BigInt(r.m) - 9_000_000_000_000_000_000n;
      const t = probePublishTimes.get(Number(seq));
      if (t !== undefined && t >= measured) stored.recordValue(Math.max(1, Math.round(Number(r.at) - (t + offset))));
    }
    await poll.end();
    pollOpen = false;
    await stopChild();
    // The profile ends when the service exits: the publishing window, in ms before that.
    const exitedAt = performance.now();
    const window = { fromMsBeforeEnd: exitedAt - measured, toMsBeforeEnd: exitedAt - publishingEndedAt };
    const unseen = [...publishedAt.values()].filter((t) => t >= measured).length;
    const warmup = { seconds: Math.round((measured - started) / 100) / 10, caughtUp };
    return { rate, achievedRate, probes: visible.totalCount + unseen, unseen, visible: pct(visible), warmupVisible: pct(warmupVisible), warmup, stored: pct(stored), natsAck: pct(natsAck), cpu, window };
  } finally {
    if (pollOpen) await poll.end();
    await stopChild();
    await dropStream();
    await nc.drain();
    await dropDb();
  }
}

interface Pregenerated {
  subject: string;
  data: Uint8Array;
  headers: ReturnType<typeof headers>;
}

/** The background traffic, generated and encoded up front (its cost is not the service's). */
function pregenerate(count: number, subjectPrefix: string): Pregenerated[] {
  const out: Pregenerated[] = [];
  const encoder = new TextEncoder();
  for (const g of generateEvents({ count, duplicateRate: 0 })) {
    const h = headers();
    h.set('Nats-Msg-Id', g.eventId);
    out.push({ subject: `${subjectPrefix}.${g.apiKeyId}.${g.event}`, data: encoder.encode(g.text), headers: h });
  }
  return out;
}

function track(set: Set<Promise<unknown>>, p: Promise<unknown>): void {
  const tracked: Promise<unknown> = p.then(
    (): boolean => set.delete(tracked),
    (): boolean => set.delete(tracked),
  );
  set.add(tracked);
}

function pct(h: hdr.Histogram): Percentiles {
  return { p50: h.getValueAtPercentile(50), p99: h.getValueAtPercentile(99), max: h.maxValue };
}

function startService(databaseUrl: string, stream: string, subjectPrefix: string, profileDir: string | null): ChildProcess {
  const env = { ...process.env, DATABASE_URL: databaseUrl, NATS_URL, NATS_STREAM: stream, NATS_SUBJECT_PREFIX: subjectPrefix, NATS_CONSUMER: `fresh-${stream}`, PORT: '0', LOG_LEVEL: 'warn', NODE_OPTIONS: '' };
  const profile = profileDir !== null ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, mailtallyArgv(['serve', '--roles', 'ingest,projector'], profile), { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  return child;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** Waits until every projection's checkpoint is at the log's head, then analyzes every table. */
async function foldedAndAnalyzed(poll: pg.Client): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    const { rows } = await poll.query<{ behind: boolean }>({
      text: 'SELECT (SELECT min(position) FROM checkpoints WHERE name = ANY($1)) < (SELECT max(position) FROM events) AS behind',
      values: [PROJECTIONS.map((p) => p.name)],
    });
    if (rows[0]?.behind === false) {
      await poll.query('ANALYZE');
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the projector did not fold the prefilled log within 300 s');
}

async function waitForProjector(poll: pg.Client): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await poll.query<{ n: number }>("SELECT count(*)::int AS n FROM leases WHERE name LIKE 'projection:%' AND expires_at > now()");
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the projector did not start within 60 s');
}
