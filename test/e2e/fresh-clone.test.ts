import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { sampleEvents, withBareMessageId } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { Proc, REPO_ROOT, freePort, stopAll } from '../support/processes.js';

/**
 * "The README's two commands, run from a fresh clone, work": the committed HEAD, cloned,
 * `npm ci`, then `npm start` in a clean environment (no DATABASE_URL, no NATS_URL) → the
 * embedded service answers and takes events with the key it prints. (`npm test` on a fresh
 * clone is what CI itself runs, so it is not run again from here.)
 */

const work = mkdtempSync(join(tmpdir(), 'mailtally-clone-'));
const clone = join(work, 'mailtally');

afterAll(async () => {
  await stopAll();
  rmSync(work, { recursive: true, force: true });
});

/** Only what a newcomer's shell would have: no mailtally settings, nothing from the test runner. */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'LANG', 'TMPDIR', 'USER']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}

describe('fresh clone', () => {
  it('git clone, npm ci, npm start: /status answers and the printed key can send events', { timeout: 300_000 }, async () => {
    await promisify(execFile)('git', ['clone', '--quiet', REPO_ROOT, clone], { env: cleanEnv() });
    expect(existsSync(join(clone, 'package-lock.json'))).toBe(true);
    expect(existsSync(join(clone, 'node_modules'))).toBe(false);

    const install = new Proc('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: clone, env: cleanEnv(), cleanEnv: true });
    const installed = await install.waitForExit(240_000);
    expect(installed, install.describe()).toEqual({ code: 0, signal: null });

    const port = await freePort();
    const start = new Proc('npm', ['start'], { cwd: clone, env: cleanEnv({ PORT: String(port) }), cleanEnv: true, detached: true });
    const url = await start.serverUrl(60_000);
    expect(url).toBe(`http://127.0.0.1:${port}`);

    const key = await start.waitForJson('the first API key on stdout', (o) => 'SecretKey' in o);
    expect(key).toMatchObject({ ApiKey: expect.any(String), SecretKey: expect.any(String), ReadOnly: false });
    expect(existsSync(join(clone, 'data'))).toBe(true); // the embedded database under ./data

    const status = await fetch(`${url}/status`);
    expect(status.status).toBe(200);
    expect(await status.json()).toMatchObject({ status: 'ok', log: { head: 0 } });

    const auth = `Basic ${Buffer.from(`${String(key['ApiKey'])}:${String(key['SecretKey'])}`).toString('base64')}`;
    const posted = await fetch(`${url}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body: `[${sampleEvents().map(withBareMessageId).join(',')}]`,
    });
    expect(posted.status).toBe(200);
    expect(await posted.json()).toEqual({ Accepted: 10, Duplicates: 0, Rejected: 0, Errors: [] });
    expect(await (await fetch(`${url}/status`)).json()).toMatchObject({ log: { head: 10 } });

    // SIGTERM to npm alone, as a process manager stops `npm start`: the service itself drains,
    // exits and lets go of ./data (npm's shell must not keep the signal from it).
    process.kill(start.pid, 'SIGTERM');
    await start.waitForExit(15_000);
    try {
      await waitFor('the service to stop after npm was told to', async () => !existsSync(join(clone, 'data', 'mailtally.pid')), 15_000, 100);
      await expect(fetch(`${url}/status`)).rejects.toThrow();
    } finally {
      // Whatever is left of the group (npm has exited), if the test failed.
      try {
        process.kill(-start.pid, 'SIGKILL');
      } catch {
        // nothing left
      }
    }
  });
});
