import { type ChildProcess, fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mailtallyArgv } from '../support/service.js';
import type { ReceiverReport } from './receiver.js';

/** The benchmark's child processes: the receiver (IPC-driven) and the dispatcher (the real CLI); waiting on what the receiver got. */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RECEIVER = fileURLToPath(new URL('./receiver.ts', import.meta.url));

export class Receiver {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(slowMs: number): Promise<Receiver> {
    const child = fork(RECEIVER, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, SLOW_MS: String(slowMs) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m: { port: number }) => resolve(m.port));
      child.once('exit', (code) => reject(new Error(`the receiver exited (${code})`)));
    });
    return new Receiver(child, port);
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  #ask<T>(msg: object): Promise<T> {
    return new Promise((resolve) => {
      this.child.once('message', (m: T) => resolve(m));
      this.child.send(msg);
    });
  }

  reset(): Promise<unknown> {
    return this.#ask({ cmd: 'reset' });
  }

  report(arrivals = false): Promise<ReceiverReport> {
    return this.#ask({ cmd: 'report', arrivals });
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

/**
 * `mailtally serve --roles dispatcher` against `databaseUrl`, with the receiver allowed;
 * `profileDir`: under --cpu-prof, its profile written there as it exits. Node options for it
 * (e.g. to try V8 flags) can be given in BENCH_DISPATCHER_NODE_ARGS.
 */
export function startDispatcher(databaseUrl: string, env: Record<string, string> = {}, profileDir: string | null = null): ChildProcess {
  const node = (process.env['BENCH_DISPATCHER_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');
  if (profileDir !== null) node.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`);
  return spawn(process.execPath, mailtallyArgv(['serve', '--roles', 'dispatcher'], node), {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', WEBHOOK_ALLOWLIST: '127.0.0.1/32', NODE_OPTIONS: '', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

/** Polls the receiver's report until `done`; past `timeoutMs` the run is void (with `state`: what was left undone). */
export async function until(receiver: Receiver, done: (r: Awaited<ReturnType<Receiver['report']>>) => boolean, timeoutMs: number, state?: () => Promise<string>) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await receiver.report();
    if (done(r)) return r;
    if (Date.now() > deadline) throw new Error(`void run: timed out with ${r.events} events / ${r.unique} ids at the receiver${state !== undefined ? `; ${await state()}` : ''}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
