import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './processes.js';
import { reachable } from './services.js';

/**
 * A Postgres cluster of the test's own (initdb in a temp directory, its own port), so a test can
 * stop and start it without touching the machine's shared server. Postgres refuses to run as
 * root: when the runner is root, every command runs as the `postgres` user (`runuser`).
 */

const BIN = process.env['PG_BIN'] ?? '/usr/lib/postgresql/15/bin';
const run = promisify(execFile);

export type StopMode = 'smart' | 'fast' | 'immediate';

export class PrivatePostgres {
  #up = false;

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** The cluster's admin URL (trust auth, user `postgres`). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  get up(): boolean {
    return this.#up;
  }

  static async create(settings: Record<string, string> = {}): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-pg-'));
    chmodSync(dir, 0o755);
    const pg = new PrivatePostgres(dir, await freePort());
    if (isRoot()) chownSync(dir, postgresUid(), postgresGid());
    await pg.#cmd('initdb', ['-D', pg.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale', 'C']);
    const conf = {
      listen_addresses: "'127.0.0.1'",
      port: String(pg.port),
      unix_socket_directories: `'${dir}'`,
      max_connections: '200',
      logging_collector: 'off',
      ...settings,
    };
    const text = Object.entries(conf).map(([k, v]) => `${k} = ${v}`).join('\n');
    writeFileSync(join(pg.dataDir, 'postgresql.conf'), `\n${text}\n`, { flag: 'a' });
    await pg.start();
    return pg;
  }

  async start(): Promise<void> {
    await this.#cmd('pg_ctl', ['-D', this.dataDir, '-l', join(this.dir, 'server.log'), '-w', '-t', '120', 'start']);
    this.#up = true;
  }

  /** `pg_ctl stop -m <mode>`: fast rolls back sessions, immediate is a crash (recovery on the next start). */
  async stop(mode: StopMode = 'fast'): Promise<void> {
    this.#up = false;
    await this.#cmd('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '120', 'stop']);
  }

  /**
   * Stops the server and starts it again as a standby in recovery (`standby.signal`, no primary
   * to follow): it accepts connections and read-only queries, and refuses writes and LISTEN.
   */
  async restartAsStandby(): Promise<void> {
    await this.stop('fast');
    const signal = join(this.dataDir, 'standby.signal');
    writeFileSync(signal, '');
    if (isRoot()) chownSync(signal, postgresUid(), postgresGid());
    await this.start();
  }

  /** Ends a standby's recovery (`pg_ctl promote`): it accepts writes again. */
  async promote(): Promise<void> {
    await this.#cmd('pg_ctl', ['-D', this.dataDir, '-w', '-t', '120', 'promote']);
  }

  async restart(mode: StopMode, downMs: number): Promise<void> {
    await this.stop(mode);
    await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  async accepting(): Promise<boolean> {
    return reachable(this.url(), this.port, 500);
  }

  /** Stops the server (if running) and deletes its directory; safe to call twice. */
  destroy(): void {
    try {
      this.#cmdSync('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // not running
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #cmd(bin: string, args: readonly string[]): Promise<void> {
    const [command, argv] = asPostgres(join(BIN, bin), args);
    try {
      await run(command, argv, { cwd: this.dir, timeout: 180_000 });
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`${bin} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    }
  }

  #cmdSync(bin: string, args: readonly string[]): void {
    const [command, argv] = asPostgres(join(BIN, bin), args);
    execFileSync(command, argv, { cwd: this.dir, stdio: 'ignore', timeout: 60_000 });
  }
}

const isRoot = (): boolean => process.getuid?.() === 0;

function asPostgres(command: string, args: readonly string[]): [string, string[]] {
  return isRoot() ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, [...args]];
}

function postgresUid(): number {
  return Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
}

function postgresGid(): number {
  return Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
}
