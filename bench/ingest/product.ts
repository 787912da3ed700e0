import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Cleanup } from '../support/cleanup.js';
import { type MachineLoad, type MachineSample, cpuMs, machineLoad, peakRssKb, pidsNamed, rssKb, sampleMachine, totalCpuMs } from '../support/proc.js';
import { NATS_URL } from '../support/scratch.js';
import { mailtallyArgv } from '../support/service.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface IngestRunOptions {
  databaseUrl: string;
  stream: string;
  subjectPrefix: string;
  consumer: string;
  /** Distinct (APIKeyID, EventID) in the backlog: the log is complete at this many rows. */
  expected: number;
  /** Node flags for the child, e.g. `--cpu-prof` (not allowed in NODE_OPTIONS). */
  nodeArgs: readonly string[];
  stallTimeoutMs: number;
  /** Where to register the child's shutdown, so an interrupted benchmark leaves no process behind. */
  cleanup: Cleanup;
}

export interface IngestRunResult {
  /** First stored row (its transaction's start) → the log holds every distinct event. */
  ms: number;
  /** Process spawn → complete, startup included. */
  spawnToDoneMs: number;
  stored: number;
  distinct: number;
  deadLetters: number;
  /** Highest position handed out: above `stored` by the identity values burnt (duplicates, rolled-back batches). */
  maxPosition: number;
  /** Transactions the database rolled back during the run (e.g. a COPY refused by the unique index). */
  rollbacks: number;
  peakRssKb: number | null;
  /** RSS when the first rows were stored: started, connected, not yet holding much backlog. */
  rssAtFirstRowKb: number | null;
  /** CPU used during the drain, ms: the ingest process, its Postgres backends, nats-server, everything else on the box. */
  cpuMs: { ingest: number; postgres: number; nats: number; poller: number; others: number };
  machine: MachineLoad;
  exitCode: number | null;
  /** Wall-clock ms: first stored row, log complete, process gone (to cut its CPU profile). */
  times: { firstAt: number; doneAt: number; exitAt: number };
  /** What the process logged (LOG_LEVEL=warn: warnings and errors only). */
  output: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Rows appended since the last poll. Prepared once: planning it anew each time costs more than running it. */
const POLL = 'SELECT count(*)::int AS n, max(position)::text AS p FROM events WHERE position > $1';

/** Starts `mailtally serve --roles ingest` on a fresh consumer and times the drain of the backlog. */
export async function runIngestProcess(o: IngestRunOptions): Promise<IngestRunResult> {
  const env = {
    ...process.env,
    DATABASE_URL: o.databaseUrl,
    NATS_URL,
    NATS_STREAM: o.stream,
    NATS_SUBJECT_PREFIX: o.subjectPrefix,
    NATS_CONSUMER: o.consumer,
    PORT: '0',
    LOG_LEVEL: 'warn',
    NODE_OPTIONS: '',
  };
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, mailtallyArgv(['serve', '--roles', 'ingest'], o.nodeArgs), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '' && output.length < 200) output.push(line.slice(0, 500));
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitAt = 0;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      exitAt = Date.now();
      resolve(code);
    }),
  );
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));
  const stopChild = o.cleanup.add(`stop ingest process ${child.pid ?? '?'}`, async () => {
    if (exitCode === undefined) exitCode = await stop(child, exited);
  });

  const db = new pg.Client({ connectionString: o.databaseUrl });
  db.on('error', () => {}); // the scratch database may be dropped under it (Ctrl-C)
  await db.connect();
  // The poll below must cost O(new rows): on a fresh table (no statistics yet) the planner would
  // otherwise seq-scan the whole growing log every 50 ms and steal a core from the ingest.
  await db.query('SET enable_seqscan = off; SET enable_bitmapscan = off');
  const pollerPid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
  const rollbacksBefore = await rollbacks(db);
  try {
    let stored = 0;
    let last = '0';
    let lastProgress = Date.now();
    let firstAt: number | null = null;
    let cpuAtFirst: CpuSnapshot | null = null;
    let rssAtFirstRowKb: number | null = null;
    while (stored < o.expected) {
      if (exitCode !== undefined) throw new Error(`ingest exited (code ${exitCode}) with ${stored} of ${o.expected} stored:\n${output.join('\n')}`);
      if (Date.now() - lastProgress > o.stallTimeoutMs) throw new Error(`ingest made no progress for ${o.stallTimeoutMs} ms at ${stored} of ${o.expected}:\n${output.join('\n')}`);
      await sleep(50);
      const r = await db.query<{ n: number; p: string | null }>({ name: 'bench-poll', text: POLL, values: [last] });
      const row = r.rows[0];
      if (row === undefined || row.n === 0 || row.p === null) continue;
      stored += row.n;
      last = row.p;
      lastProgress = Date.now();
      if (firstAt === null) {
        const first = await db.query<{ t: number }>('SELECT extract(epoch FROM min(recorded_at))::float8 * 1000 AS t FROM events');
        firstAt = first.rows[0]?.t ?? Date.now();
        cpuAtFirst = await cpuSnapshot(db, child, pollerPid);
        rssAtFirstRowKb = child.pid !== undefined ? rssKb(child.pid) : null;
      }
    }
    const doneAt = Date.now();
    const cpuAtDone = await cpuSnapshot(db, child, pollerPid);
    const rss = child.pid !== undefined ? peakRssKb(child.pid) : null;
    await stopChild();

    const counts = await db.query<{ n: number; d: number; dl: number; p: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT (api_key_id, event_id))::int AS d, (SELECT count(*)::int FROM dead_letters) AS dl, max(position)::float8 AS p FROM events',
    );
    const rolledBack = (await rollbacks(db)) - rollbacksBefore;
    const c = counts.rows[0];
    const before = cpuAtFirst ?? cpuAtDone;
    let postgres = 0;
    for (const [pid, ms] of cpuAtDone.backends) postgres += ms - (before.backends.get(pid) ?? 0);
    const poller = cpuAtDone.poller - before.poller;
    const ours = cpuAtDone.ingest - before.ingest + postgres + cpuAtDone.nats - before.nats + poller;
    const all = cpuAtDone.machine.busyMs - before.machine.busyMs;
    return {
      ms: doneAt - (firstAt ?? doneAt),
      spawnToDoneMs: doneAt - spawnedAt,
      stored: c?.n ?? 0,
      distinct: c?.d ?? 0,
      deadLetters: c?.dl ?? 0,
      maxPosition: c?.p ?? 0,
      rollbacks: rolledBack,
      peakRssKb: rss,
      rssAtFirstRowKb,
      cpuMs: { ingest: cpuAtDone.ingest - before.ingest, postgres, nats: cpuAtDone.nats - before.nats, poller, others: Math.max(0, all - ours) },
      machine: machineLoad(before.machine, cpuAtDone.machine),
      exitCode: exitCode ?? null,
      times: { firstAt: firstAt ?? doneAt, doneAt, exitAt },
      output,
    };
  } finally {
    await db.end();
    await stopChild();
  }
}

/** Counted by the server when each backend's statistics are flushed (at the latest when it exits). */
async function rollbacks(db: pg.Client): Promise<number> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const r = await db.query<{ n: number }>('SELECT xact_rollback::float8 AS n FROM pg_stat_database WHERE datname = current_database()');
  return r.rows[0]?.n ?? 0;
}

interface CpuSnapshot {
  ingest: number;
  /** By pid: every other backend connected to this database (the ingest's pool). */
  backends: Map<number, number>;
  nats: number;
  /** This benchmark's own polling backend. */
  poller: number;
  machine: MachineSample;
}

async function cpuSnapshot(db: pg.Client, child: ChildProcess, pollerPid: number): Promise<CpuSnapshot> {
  const r = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  return {
    ingest: child.pid !== undefined ? cpuMs(child.pid) : 0,
    backends: new Map(r.rows.map((x) => [x.pid, cpuMs(x.pid)])),
    nats: totalCpuMs(pidsNamed('nats-server')),
    poller: cpuMs(pollerPid),
    machine: sampleMachine(),
  };
}

/** SIGTERM (the service drains and exits), SIGKILL after 30 s. */
async function stop(child: ChildProcess, exited: Promise<number | null>): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}
