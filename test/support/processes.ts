import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { CONFIG_KEYS } from '../../src/config.js';
import { SERVICE_NODE_FLAGS } from '../../src/node-flags.js';

/**
 * Child processes for end-to-end tests: the `mailtally` CLI (or any command) with a given
 * environment, its output collected, helpers to wait for a line or for its exit, and a registry
 * so `stopAll()` in afterEach/afterAll leaves nothing running even when a test failed.
 */

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI_PATH = fileURLToPath(new URL('../../bin/mailtally.js', import.meta.url));

/** Every variable mailtally reads: never inherited from the test runner, only what a test gives. */
const CONFIG_VARS = CONFIG_KEYS;

export function childEnv(env: Record<string, string>): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !CONFIG_VARS.includes(k)) base[k] = v;
  return { ...base, ...env };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  env: Record<string, string>;
  cwd?: string;
  /** Own process group (for `npm start`, whose node child must be stopped too). */
  detached?: boolean;
  /** Use exactly `env` (plus nothing from the runner). */
  cleanEnv?: boolean;
}

const live = new Set<Proc>();

export class Proc {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  exit: Exit | null = null;
  readonly exited: Promise<Exit>;
  readonly #detached: boolean;

  constructor(command: string, args: readonly string[], opts: SpawnOptions) {
    this.#detached = opts.detached === true;
    this.child = spawn(command, args, {
      cwd: opts.cwd ?? REPO_ROOT,
      env: opts.cleanEnv === true ? opts.env : childEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: this.#detached,
    });
    this.child.stdout?.setEncoding('utf8').on('data', (s: string) => (this.stdout += s));
    this.child.stderr?.setEncoding('utf8').on('data', (s: string) => (this.stderr += s));
    live.add(this);
    this.exited = new Promise((resolve) => {
      const done = (exit: Exit) => {
        this.exit ??= exit;
        live.delete(this);
        resolve(this.exit);
      };
      this.child.once('error', () => done({ code: null, signal: null }));
      this.child.once('close', (code, signal) => done({ code, signal }));
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('process did not start');
    return this.child.pid;
  }

  /** Complete lines of stdout that are JSON objects (pino logs, summaries, printed keys). */
  jsonLines(): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of this.stdout.split('\n')) {
      if (!line.startsWith('{') || !line.endsWith('}')) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not JSON after all
      }
    }
    return out;
  }

  /** Waits until `probe` gives a value; fails at once if the process exits first. */
  async waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = probe();
      if (value !== undefined) return value;
      if (this.exit !== null) throw new Error(`process exited (${JSON.stringify(this.exit)}) before ${what}\n${this.describe()}`);
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${this.describe()}`);
      await sleep(25);
    }
  }

  waitForJson(what: string, match: (o: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>> {
    return this.waitFor(what, () => this.jsonLines().find(match), timeoutMs);
  }

  /** The server's address from its "mailtally started" log line (needs LOG_LEVEL=info). */
  async serverUrl(timeoutMs = 60_000): Promise<string> {
    const line = await this.waitForJson('the "mailtally started" log line', (o) => o['msg'] === 'mailtally started', timeoutMs);
    if (typeof line['url'] !== 'string') throw new Error(`no url in ${JSON.stringify(line)}`);
    return line['url'];
  }

  async waitForExit(timeoutMs = 30_000): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms\n${this.describe()}`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  signal(sig: NodeJS.Signals): void {
    if (this.exit !== null) return;
    try {
      if (this.#detached) process.kill(-this.pid, sig);
      else this.child.kill(sig);
    } catch {
      // already gone
    }
  }

  /** SIGTERM, then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 5000): Promise<Exit> {
    if (this.exit !== null) return this.exit;
    this.signal('SIGTERM');
    try {
      return await this.waitForExit(graceMs);
    } catch {
      this.signal('SIGKILL');
      return this.exited;
    }
  }

  describe(): string {
    const tail = (s: string) => (s.length > 3000 ? `…${s.slice(-3000)}` : s);
    return `--- stdout ---\n${tail(this.stdout)}\n--- stderr ---\n${tail(this.stderr)}`;
  }
}

/** `node bin/mailtally.js <args>` */
export function spawnCli(args: readonly string[], opts: SpawnOptions): Proc {
  return new Proc(process.execPath, [...SERVICE_NODE_FLAGS, CLI_PATH, ...args], opts);
}

export interface Completed extends Exit {
  stdout: string;
  stderr: string;
}

/** Runs the CLI to completion. */
export async function runCli(args: readonly string[], opts: SpawnOptions & { timeoutMs?: number }): Promise<Completed> {
  const p = spawnCli(args, opts);
  try {
    const exit = await p.waitForExit(opts.timeoutMs ?? 60_000);
    return { ...exit, stdout: p.stdout, stderr: p.stderr };
  } finally {
    await p.stop(1000);
  }
}

/** Stops every process these helpers started that is still running. */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop(3000)));
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
