import { readFileSync } from 'node:fs';
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
  readonly #expected = new WeakSet<Proc>();
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
    const p = spawnCli(['serve', '--roles', role], { env: { ...this.envOf(role), LOG_LEVEL: 'info' } });
    this.#procs.set(role, p);
    this.starts.set(role, (this.starts.get(role) ?? 0) + 1);
    void p.exited.then((exit) => this.#onExit(role, p, exit));
    await p.waitForJson(`${role} to start`, (o) => o['msg'] === 'mailtally started', 90_000);
    return p;
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
      for (const [role, p] of this.#procs) {
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
      [...this.#procs].map(async ([role, p]) => {
        this.#expected.add(p);
        exits.set(role, await p.stop(graceMs));
      }),
    );
    return exits;
  }

  /** SIGKILLs every process at once, synchronously (for a process 'exit' hook). */
  killNow(): void {
    for (const p of this.#procs.values()) {
      this.#expected.add(p);
      p.signal('SIGKILL');
    }
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
