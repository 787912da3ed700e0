import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Proc, freePort, sleep } from './processes.js';
import { reachable } from './services.js';

/**
 * A nats-server with JetStream of the test's own (its own port and store directory), so a test
 * can kill and restart it without touching the machine's shared server. A restart reuses the
 * store directory, so streams, consumers and stored messages survive it.
 */

const NATS_SERVER = process.env['NATS_SERVER_BIN'] ?? '/usr/sbin/nats-server';

export class PrivateNats {
  #proc: Proc | null = null;

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get up(): boolean {
    return this.#proc !== null && this.#proc.exit === null;
  }

  get pid(): number | null {
    return this.#proc?.pid ?? null;
  }

  static async create(): Promise<PrivateNats> {
    const nats = new PrivateNats(mkdtempSync(join(tmpdir(), 'mailtally-nats-')), await freePort());
    await nats.start();
    return nats;
  }

  async start(): Promise<void> {
    if (this.up) return;
    const proc = new Proc(NATS_SERVER, ['-js', '-sd', join(this.dir, 'store'), '-a', '127.0.0.1', '-p', String(this.port)], { env: {} });
    this.#proc = proc;
    const deadline = Date.now() + 30_000;
    while (!(await reachable(this.url, this.port, 300))) {
      if (proc.exit !== null) throw new Error(`nats-server exited at start (${JSON.stringify(proc.exit)})\n${proc.describe()}`);
      if (Date.now() > deadline) throw new Error(`nats-server did not listen on ${this.port} within 30 s\n${proc.describe()}`);
      await sleep(50);
    }
  }

  /** Kills the server (SIGKILL by default: no chance to flush anything of its own). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const proc = this.#proc;
    if (proc === null || proc.exit !== null) return;
    proc.signal(signal);
    await proc.waitForExit(30_000);
  }

  async restart(signal: NodeJS.Signals, downMs: number): Promise<void> {
    await this.kill(signal);
    await sleep(downMs);
    await this.start();
  }

  /** SIGKILL, synchronously (for a process 'exit' hook). */
  killNow(): void {
    this.#proc?.signal('SIGKILL');
  }

  /** Kills the server and deletes its store; safe to call twice. */
  async destroy(): Promise<void> {
    await this.kill().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}
