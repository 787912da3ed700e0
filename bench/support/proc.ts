import { readFileSync, readdirSync } from 'node:fs';

/** Linux /proc readings: a process's peak RSS and CPU time. */

const CLOCK_TICKS_PER_SECOND = 100;

function statusKb(pid: number, field: string): number | null {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm'));
    return line?.[1] !== undefined ? Number(line[1]) : null;
  } catch {
    return null;
  }
}

/** VmHWM, the resident set's high-water mark, in KiB; null once the process is gone. */
export const peakRssKb = (pid: number): number | null => statusKb(pid, 'VmHWM');
/** VmRSS, the resident set now, in KiB. */
export const rssKb = (pid: number): number | null => statusKb(pid, 'VmRSS');

/** User + system CPU time of a process (all its threads), in ms; 0 if it is gone. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command name: field 3 is the state, so utime and stime (fields 14, 15) sit at 11, 12.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

export const totalCpuMs = (pids: readonly number[]): number => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);

/** Pids whose command name is `comm` (e.g. nats-server). */
export function pidsNamed(comm: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === comm) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

export interface MachineSample {
  at: number;
  /** Busy and total CPU time over all cores since boot, ms. */
  busyMs: number;
  totalMs: number;
  /** PSI: time some runnable task waited for a CPU, µs since boot (0 if unsupported). */
  stallUs: number;
}

export interface MachineLoad {
  /** Share of all cores' time that was busy (anyone's work, ours included). */
  busy: number;
  /** Share of wall time in which some task was runnable but had no CPU (contention). */
  cpuPressure: number;
}

export function sampleMachine(): MachineSample {
  const cpu = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = cpu;
  const busy = user + nice + system + irq + softirq + steal;
  let stallUs = 0;
  try {
    stallUs = Number(readFileSync('/proc/pressure/cpu', 'utf8').match(/^some .*total=(\d+)/m)?.[1] ?? 0);
  } catch {
    // no PSI on this kernel
  }
  return { at: Date.now(), busyMs: (busy * 1000) / CLOCK_TICKS_PER_SECOND, totalMs: ((busy + idle + iowait) * 1000) / CLOCK_TICKS_PER_SECOND, stallUs };
}

export function machineLoad(from: MachineSample, to: MachineSample): MachineLoad {
  const total = to.totalMs - from.totalMs;
  const wall = to.at - from.at;
  return { busy: total > 0 ? (to.busyMs - from.busyMs) / total : 0, cpuPressure: wall > 0 ? (to.stallUs - from.stallUs) / 1000 / wall : 0 };
}

/** Runs `fn` and reports how loaded the machine was meanwhile. */
export async function withMachineLoad<T>(fn: () => Promise<T>): Promise<T & { machine: MachineLoad }> {
  const from = sampleMachine();
  const result = await fn();
  return { ...result, machine: machineLoad(from, sampleMachine()) };
}
