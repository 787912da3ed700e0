import { readdirSync, statSync } from 'node:fs';
import { sql } from 'kysely';
import type { Db } from '../../src/db/connect.js';
import type { Cleanup } from '../support/cleanup.js';
import { type ProfileSummary, summarizeCpuProfile } from '../support/cpu-profile.js';
import { cpuMs, type MachineLoad, machineLoad, pidsNamed, sampleMachine } from '../support/proc.js';
import { createUrls, loadEvents, TENANTS } from './load.js';
import { type Receiver, startDispatcher, stopProcess, until } from './processes.js';
import { scratchDb } from './scratch-db.js';

/** The throughput phases: N events already in the log, delivered by a new dispatcher process (Version 1 or 2). */

export interface Throughput {
  /** Version 1: from the tenth of the deliveries on; Version 2: the whole window. */
  perSec: number;
  /** From the first arrival to the last. */
  wholePerSec: number;
  events: number;
  requests: number;
  ms: number;
  /** The dispatcher process's CPU time per event (µs): its cost, whatever else the machine does. */
  dispatcherCpuUsPerEvent: number;
  /** Postgres's CPU time (all its processes) per event (µs) over the same span. */
  postgresCpuUsPerEvent: number;
  /** The receiver's CPU time per event (µs) over the same span. */
  receiverCpuUsPerEvent: number;
  machine: MachineLoad;
  /** Rows the run wrote to the outbox (Version 1: first attempts not sent straight from the log, and retries). */
  outboxRows: number;
  /** The dispatcher's CPU profile from its first delivery to its last (with --profile). */
  profile: ProfileSummary | null;
}

export async function throughput(cleanup: Cleanup, receiver: Receiver, version: 1 | 2, count: number, profileDir: string | null = null): Promise<Throughput> {
  const s = await scratchDb(cleanup);
  try {
    await createUrls(s.db, TENANTS, version, (t, type) => receiver.url(`/t${t}/${type}`));
    await loadEvents(s.db, TENANTS, count, `v${version}`);
    await receiver.reset();
    const from = sampleMachine();
    const child = startDispatcher(s.url, {}, profileDir);
    const stop = cleanup.add('dispatcher', () => stopProcess(child));
    let result: Omit<Throughput, 'profile' | 'outboxRows'>;
    let times: { firstAt: number; doneAt: number };
    try {
      // The dispatcher's CPU from its first delivery on (startup, module loading, left out).
      let first: { cpu: number; postgresCpu: Map<number, number>; receiverCpu: number; events: number; at: number } | null = null;
      const report = await until(
        receiver,
        (r) => {
          if (first === null && r.events > 0) first = { cpu: cpuMs(child.pid ?? 0), postgresCpu: postgresCpuByPid(), receiverCpu: cpuMs(receiver.pid), events: r.events, at: Date.now() };
          return r.events >= count;
        },
        120_000,
      );
      const start = first ?? { cpu: 0, postgresCpu: new Map<number, number>(), receiverCpu: 0, events: 0, at: Date.now() };
      const cpu = cpuMs(child.pid ?? 0) - start.cpu;
      const receiverCpu = cpuMs(receiver.pid) - start.receiverCpu;
      // CPU ms over the span → µs per event delivered in it.
      const usPerEvent = (ms: number) => Math.round((ms * 1000) / Math.max(1, count - start.events));
      // Backends started since (the dispatcher's pool growing) count in full.
      const postgresCpu = [...postgresCpuByPid()].reduce((sum, [pid, ms]) => sum + ms - (start.postgresCpu.get(pid) ?? 0), 0);
      times = { firstAt: start.at, doneAt: Date.now() };
      const machine = machineLoad(from, sampleMachine());
      if (report.events !== count || report.duplicates !== 0) throw new Error(`void run: ${count} published, ${report.events} events arrived, ${report.duplicates} duplicates`);
      const ms = report.lastAt - report.firstAt;
      const wholePerSec = ((version === 1 ? report.requests : report.events) * 1000) / ms;
      result = {
        perSec: version === 1 ? rateFromTenth((await receiver.report(true)).arrivals ?? []) : wholePerSec,
        wholePerSec,
        events: report.events,
        requests: report.requests,
        ms: Math.round(ms),
        dispatcherCpuUsPerEvent: usPerEvent(cpu),
        postgresCpuUsPerEvent: usPerEvent(postgresCpu),
        receiverCpuUsPerEvent: usPerEvent(receiverCpu),
        machine,
      };
    } finally {
      await stop();
    }
    return { ...result, outboxRows: await outboxRowsWritten(s.db), profile: profileDir !== null ? dispatcherProfile(profileDir, times) : null };
  } finally {
    await s.drop();
  }
}

/** Rows ever inserted into the outbox of the run's database (its dispatcher stopped: its statistics are flushed). */
async function outboxRowsWritten(db: Db): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT coalesce(sum(n_tup_ins), 0)::text AS n FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'`.execute(db.kysely);
  return Number(rows[0]?.n ?? 0);
}

/** Arrivals per second from the tenth arrival to the last (the window a cold process's start is left out of). */
function rateFromTenth(arrivals: readonly (readonly [string, number])[]): number {
  const at = arrivals.map(([, t]) => t).sort((a, b) => a - b);
  const from = Math.floor(at.length / 10);
  return ((at.length - from) * 1000) / ((at.at(-1) ?? 0) - (at[from] ?? 0));
}

const postgresCpuByPid = () => new Map(pidsNamed('postgres').map((pid) => [pid, cpuMs(pid)]));

/** The dispatcher's profile (written as it exits), cut to its deliveries. */
function dispatcherProfile(dir: string, t: { firstAt: number; doneAt: number }): ProfileSummary | null {
  const exitAt = Date.now();
  const file = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => `${dir}/${f}`)
    .sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return file !== undefined ? summarizeCpuProfile(file, { fromMsBeforeEnd: exitAt - t.firstAt, toMsBeforeEnd: exitAt - t.doneAt }, 40) : null;
}
