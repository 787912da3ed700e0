import type pg from 'pg';
import { cpuMs, machineLoad, pidsNamed, sampleMachine } from '../support/proc.js';

/** CPU time of the processes that share the machine during a run (ms so far); Postgres: the backends of the run's database. */
export async function cpuSnapshot(servicePid: number, poll: pg.Client) {
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

export function cpuUsed(from: CpuSnapshot, to: CpuSnapshot, wallMs: number) {
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
