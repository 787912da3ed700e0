import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Exit, type Proc, sleep, spawnCli } from './processes.js';

/**
 * Each mailtally role as its own process (`serve --roles <role>`), supervised like a service
 * manager would: `kill(role)` SIGKILLs one and starts it again; a process that exits without
 * being asked to is recorded as a crash (with its output) and restarted. The resident set size
 * of every process is sampled, so a test can bound memory and report the peaks.
 */

export type RoleName = 'ingest' | 'projector' | 'dispatcher' | 'api';

export interface Crash {
  role: RoleName;
  exit: Exit;
  at: number;
  output: string;
}

export class RoleProcesses {
  readonly crashes: Crash[] = [];
  /** Peak RSS (bytes) per role over every process that ran it. */
  readonly peakRss = new Map<RoleName, number>();
  readonly starts = new Map<RoleName, number>();
  readonly #procs = new Map<RoleName, Proc>();
  /** Second processes of a role while they run beside the first (see `pauseBesideStandby`). */
  readonly #standbys = new Map<RoleName, Proc>();
  readonly #expected = new WeakSet<Proc>();
  /** Every process started, in order, for `writeLogs`. */
  readonly #all: { role: RoleName; proc: Proc }[] = [];
  #sampler: NodeJS.Timeout | null = null;
  #closing = false;

  constructor(private readonly envOf: (role: RoleName) => Record<string, string>) {}

  proc(role: RoleName): Proc {
    const p = this.#procs.get(role);
    if (p === undefined) throw new Error(`role ${role} was never started`);
    return p;
  }

  /** Starts the role and waits for its "mailtally started" line. */
  async start(role: RoleName): Promise<Proc> {
    const p = this.#spawn(role);
    this.#procs.set(role, p);
    await p.waitForJson(`${role} to start`, (o) => o['msg'] === 'mailtally started', 300_000);
    return p;
  }

  /**
   * A second process of the role starts beside the first; the first is then frozen (SIGSTOP)
   * for `pauseMs` — past its leases, mid-transaction maybe — and thawed (SIGCONT), so both run
   * believing they hold the work for `overlapMs`, until the first is SIGKILLed.
   */
  async pauseBesideStandby(role: RoleName, pauseMs: number, overlapMs = 3000): Promise<void> {
    const old = this.proc(role);
    const standby = this.#spawn(role);
    this.#standbys.set(role, standby);
    await standby.waitForJson(`a second ${role} to start`, (o) => o['msg'] === 'mailtally started', 300_000);
    old.signal('SIGSTOP');
    await sleep(pauseMs);
    old.signal('SIGCONT');
    await sleep(overlapMs);
    this.#expected.add(old);
    old.signal('SIGKILL');
    await old.waitForExit(30_000);
    this.#procs.set(role, standby);
    this.#standbys.delete(role);
  }

  /** SIGKILL, wait for the exit, stay down `downMs`, start again. */
  async kill(role: RoleName, downMs: number): Promise<void> {
    const p = this.proc(role);
    this.#expected.add(p);
    p.signal('SIGKILL');
    await p.waitForExit(30_000);
    await sleep(downMs);
    await this.start(role);
  }

  /** Samples every running process's RSS every `everyMs`. */
  sampleRss(everyMs = 250): void {
    this.#sampler = setInterval(() => {
      for (const [role, p] of [...this.#procs, ...this.#standbys]) {
        if (p.exit !== null) continue;
        const rss = rssOf(p.pid);
        if (rss !== null && rss > (this.peakRss.get(role) ?? 0)) this.peakRss.set(role, rss);
      }
    }, everyMs);
  }

  /** SIGTERM to every role (graceful drain); their exits, by role. */
  async stopAll(graceMs = 20_000): Promise<Map<RoleName, Exit>> {
    this.#closing = true;
    if (this.#sampler !== null) clearInterval(this.#sampler);
    const exits = new Map<RoleName, Exit>();
    await Promise.all(
      [...this.#standbys, ...this.#procs].map(async ([role, p]) => {
        this.#expected.add(p);
        exits.set(role, await p.stop(graceMs));
      }),
    );
    return exits;
  }

  /** Writes each process's output to `<dir>/<role>-<n>.log`; returns the file names. */
  writeLogs(dir: string): string[] {
    mkdirSync(dir, { recursive: true });
    const seen = new Map<RoleName, number>();
    return this.#all.map(({ role, proc }) => {
      const n = (seen.get(role) ?? 0) + 1;
      seen.set(role, n);
      const file = join(dir, `${role}-${n}.log`);
      writeFileSync(file, `${proc.stdout}\n--- stderr ---\n${proc.stderr}\n--- exit ${JSON.stringify(proc.exit)}\n`);
      return file;
    });
  }

  /** SIGKILLs every process at once, synchronously (for a process 'exit' hook). */
  killNow(): void {
    for (const p of [...this.#procs.values(), ...this.#standbys.values()]) {
      this.#expected.add(p);
      p.signal('SIGKILL');
    }
  }

  #spawn(role: RoleName): Proc {
    const p = spawnCli(['serve', '--roles', role], { env: { ...this.envOf(role), LOG_LEVEL: 'info' } });
    this.starts.set(role, (this.starts.get(role) ?? 0) + 1);
    this.#all.push({ role, proc: p });
    void p.exited.then((exit) => this.#onExit(role, p, exit));
    return p;
  }

  #onExit(role: RoleName, p: Proc, exit: Exit): void {
    if (this.#expected.has(p) || this.#closing) return;
    this.crashes.push({ role, exit, at: Date.now(), output: p.describe() });
    if (this.#procs.get(role) !== p) return;
    // A supervisor restarts what crashed; the crash itself fails the test.
    void sleep(1000).then(() => (this.#closing ? undefined : this.start(role).catch(() => {})));
  }
}

/** VmRSS of a process in bytes (null once it is gone). */
export function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) * 1024;
  } catch {
    return null;
  }
}
