import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DATA_DIR_PID_FILE } from '../../src/db/data-dir-lock.js';

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
});
