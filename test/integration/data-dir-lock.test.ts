import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { connectDb } from '../../src/db/connect.js';
import { acquireDataDirLock, DATA_DIR_PID_FILE, DataDirInUseError } from '../../src/db/data-dir-lock.js';

/**
 * The embedded database's directory lock, taken by processes starting at the same moment (a
 * supervisor's restart beside a `mailtally replay`): never by two, whether the pid file they find
 * is stale (its process killed) or there is none.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOCK_MODULE = pathToFileURL(join(ROOT, 'src/db/data-dir-lock.ts')).href;
const work = mkdtempSync(join(tmpdir(), 'mailtally-lock-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Takes the lock at `at` (ms since the epoch) and holds it until the other of its pair has tried; prints OK or REFUSED. */
const SCRIPT = `
const { acquireDataDirLock } = await import(${JSON.stringify(LOCK_MODULE)});
const [dir, at] = [process.argv[2], Number(process.argv[3])];
while (Date.now() < at) {}
try {
  const release = acquireDataDirLock(dir);
  console.log('OK');
  await new Promise((r) => setTimeout(r, 5000));
  release();
} catch (err) {
  console.log('REFUSED ' + err.message);
}
`;

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', () => resolve(out.trim()));
  });
}

/** The pid of a process that has ended. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((r) => child.on('exit', r));
  return child.pid as number;
}

describe('the data directory lock', () => {
  it.each([
    ['a stale pid file', true],
    ['no pid file', false],
  ])('goes to one of two processes starting at once, with %s', async (_, stale) => {
    const script = join(work, 'take-lock.mjs');
    writeFileSync(script, SCRIPT);
    const trials = 6;
    const dirs = Array.from({ length: trials }, () => mkdtempSync(join(work, 'dir-')));
    if (stale) for (const dir of dirs) writeFileSync(join(dir, DATA_DIR_PID_FILE), String(await deadPid()));
    // Every process started (and its module loaded) by then, on a busy machine too.
    const at = Date.now() + 6000;
    const outcomes = await Promise.all(dirs.map((dir) => Promise.all([run([script, dir, String(at)]), run([script, dir, String(at)])])));
    for (const pair of outcomes) {
      expect(pair.filter((o) => o === 'OK'), pair.join(' | ')).toHaveLength(1);
      expect(pair.find((o) => o !== 'OK')).toMatch(/^REFUSED The embedded database in .* is in use by process \d+/);
    }
  }, 60_000);

  it('takes over a pid file left empty (its process killed before it wrote its pid) or naming this very process (a pid reused)', () => {
    for (const left of ['', String(process.pid)]) {
      const dir = mkdtempSync(join(work, 'left-'));
      writeFileSync(join(dir, DATA_DIR_PID_FILE), left);
      const release = acquireDataDirLock(dir);
      expect(readFileSync(join(dir, DATA_DIR_PID_FILE), 'utf8')).toBe(String(process.pid));
      release();
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  it('refuses while the pid file names a live process, and leaves the file alone', () => {
    const dir = mkdtempSync(join(work, 'held-'));
    writeFileSync(join(dir, DATA_DIR_PID_FILE), String(process.ppid));
    expect(() => acquireDataDirLock(dir)).toThrow(DataDirInUseError);
    expect(readFileSync(join(dir, DATA_DIR_PID_FILE), 'utf8')).toBe(String(process.ppid));
  });

  it('opens a new embedded database beside a file a start killed mid-takeover left', async () => {
    const dir = mkdtempSync(join(work, 'aside-'));
    writeFileSync(join(dir, `${DATA_DIR_PID_FILE}.stale-4242-deadbeef`), '4242');
    const db = await connectDb({ kind: 'pglite', dataDir: dir });
    await db.close();
    // PGlite may still flush its in-memory file system for a moment after close().
    await new Promise((r) => setTimeout(r, 1000));
    expect(existsSync(join(dir, 'PG_VERSION'))).toBe(true);
  }, 60_000);
});
