import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { sampleEvents, withBareMessageId } from '../support/events.js';
import { type Proc, runCli, spawnCli, stopAll } from '../support/processes.js';

/**
 * Embedded mode: no DATABASE_URL, no NATS_URL, PGlite under DATA_DIR, HTTP ingest. What a
 * newcomer sees on `npm start`, and what survives a restart.
 */

const dataDir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-'));
const env = { DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
const batchText = `[${sampleEvents().map(withBareMessageId).join(',')}]`;

afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
});

interface FirstKey {
  APIKeyID: unknown;
  ApiKey: string;
  SecretKey: string;
  ReadOnly: boolean;
}

const printedKeys = (p: Proc) => p.jsonLines().filter((o) => 'SecretKey' in o);

async function status(url: string): Promise<{ status: number; body: { log: { head: number }; deadLetters: number } }> {
  const res = await fetch(`${url}/status`);
  return { status: res.status, body: (await res.json()) as { log: { head: number }; deadLetters: number } };
}

async function postEvents(url: string, key: FirstKey): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Basic ${Buffer.from(`${key.ApiKey}:${key.SecretKey}`).toString('base64')}` },
    body: batchText,
  });
  return { status: res.status, body: await res.json() };
}

describe('embedded mode (PGlite under DATA_DIR, HTTP ingest)', () => {
  let key: FirstKey;

  it('first start prints one API key, answers /status, stores events, refuses a second process, stops on SIGTERM', { timeout: 120_000 }, async () => {
    const server = spawnCli(['serve'], { env });
    const url = await server.serverUrl(60_000);
    expect(server.stdout).toContain('First API key');
    const keys = printedKeys(server);
    expect(keys).toHaveLength(1);
    key = keys[0] as unknown as FirstKey;
    expect(key).toMatchObject({ ApiKey: expect.any(String), SecretKey: expect.any(String), ReadOnly: false });

    expect(await status(url)).toMatchObject({ status: 200, body: { status: 'ok', log: { head: 0 }, deadLetters: 0 } });
    expect(await postEvents(url, key)).toEqual({ status: 200, body: { Accepted: 10, Duplicates: 0, Rejected: 0, Errors: [] } });
    expect(await status(url)).toMatchObject({ status: 200, body: { log: { head: 10 } } });

    // The data dir is locked while the server holds it; the message names the holder.
    const migrate = await runCli(['migrate'], { env: { DATA_DIR: dataDir } });
    expect(migrate.code).toBe(1);
    expect(migrate.stderr).toContain(`in use by process ${server.pid} (\`mailtally serve\`)`);
    expect(migrate.stderr).toContain(dataDir);

    server.signal('SIGTERM');
    expect(await server.waitForExit(15_000)).toEqual({ code: 0, signal: null });
    expect(existsSync(join(dataDir, 'mailtally.pid'))).toBe(false);
  });

  it('a restart on the same DATA_DIR keeps the data and the key, and prints no new key', { timeout: 120_000 }, async () => {
    expect(key).toBeDefined();
    const server = spawnCli(['serve'], { env });
    const url = await server.serverUrl(60_000);
    expect(printedKeys(server)).toEqual([]);
    expect(server.stdout).not.toContain('First API key');

    expect(await status(url)).toMatchObject({ status: 200, body: { log: { head: 10 } } });
    expect(await postEvents(url, key)).toEqual({ status: 200, body: { Accepted: 0, Duplicates: 10, Rejected: 0, Errors: [] } });
    expect(await server.stop(15_000)).toEqual({ code: 0, signal: null });
    // Every role ran: nothing to warn of.
    expect(server.jsonLines().filter((l) => l['absent'] !== undefined)).toEqual([]);
  });

  it('roles left out of --roles are named at start, with what goes undone: no other process can run them', { timeout: 120_000 }, async () => {
    expect(key).toBeDefined();
    const server = spawnCli(['serve', '--roles', 'api,projector'], { env });
    const url = await server.serverUrl(60_000);
    const warned = server.jsonLines().filter((l) => l['absent'] !== undefined);
    expect(warned.map((l) => l['absent'])).toEqual([['ingest', 'dispatcher']]);
    expect(warned[0]?.['msg']).toBe(
      'the embedded database admits one process, so the roles left out run nowhere: ingest (no events are taken in, POST /v1/events answering 404), dispatcher (no webhooks are sent); set DATABASE_URL to split the roles over processes',
    );
    expect((await postEvents(url, key)).status).toBe(404);
    expect(await server.stop(15_000)).toEqual({ code: 0, signal: null });
  });

  it('after a SIGKILL the stale lock is cleared and the data is still there', { timeout: 120_000 }, async () => {
    const killed = spawnCli(['serve'], { env });
    await killed.serverUrl(60_000);
    killed.signal('SIGKILL');
    await killed.waitForExit(10_000);
    expect(existsSync(join(dataDir, 'mailtally.pid'))).toBe(true);

    const server = spawnCli(['serve'], { env });
    const url = await server.serverUrl(60_000);
    expect(printedKeys(server)).toEqual([]);
    expect(await status(url)).toMatchObject({ status: 200, body: { log: { head: 10 } } });
    expect(await postEvents(url, key)).toMatchObject({ status: 200, body: { Duplicates: 10 } });
    expect(await server.stop(15_000)).toEqual({ code: 0, signal: null });
  });
});

describe('embedded mode with a backlog', () => {
  // On the one session of the embedded database, the start waited behind the projector's
  // batches: the server listened only once the backlog was applied (34 s after 150k events).
  it('listens while the projector still applies an imported backlog', { timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-backlog-'));
    try {
      const own = { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info' };
      const key = JSON.parse((await runCli(['keys', 'create'], { env: own })).stdout) as { APIKeyID: number };
      const file = join(dir, 'backlog.jsonl');
      const lines = Array.from({ length: 40_000 }, (_, i) => JSON.stringify({ event: ['sent', 'open', 'click'][i % 3], time: 1_700_000_000 + i, MessageID: 7_000_000 + Math.floor(i / 3), email: `r${Math.floor(i / 3)}@example.com`, url: 'https://example.com/a' }));
      writeFileSync(file, `${lines.join('\n')}\n`);
      const imported = await runCli(['import', file, '--api-key-id', String(key.APIKeyID)], { env: own, timeoutMs: 180_000 });
      expect(imported.code, imported.stderr).toBe(0);

      const server = spawnCli(['serve'], { env: own });
      const listening = await server.waitForJson('the server listening', (l) => typeof l['msg'] === 'string' && l['msg'].startsWith('Server listening at'), 120_000);
      const url = /(http:\/\/\S+)/.exec(String(listening['msg']))?.[1] as string;
      const first = (await (await fetch(`${url}/status`)).json()) as { checkpoints: Record<string, { lag: number }> };
      expect(Math.max(...Object.values(first.checkpoints).map((c) => c.lag)), 'a read model still behind when /status first answers').toBeGreaterThan(0);
      await waitForLag0(url);
      expect(await server.stop(30_000)).toEqual({ code: 0, signal: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function waitForLag0(url: string): Promise<void> {
  for (const deadline = Date.now() + 180_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
    const body = (await (await fetch(`${url}/status`)).json()) as { checkpoints: Record<string, { lag: number }> };
    if (Object.values(body.checkpoints).every((c) => c.lag === 0)) return;
  }
  throw new Error('the backlog was not applied within 180 s');
}

describe('embedded mode: one-off commands', () => {
  it('an unusable DATA_DIR (a file, or under one) exits 1 naming DATA_DIR and the path', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-file-'));
    try {
      const file = join(dir, 'not-a-dir');
      writeFileSync(file, '');
      for (const [args, dataDir] of [
        [['serve'], '/dev/null'],
        [['migrate'], '/dev/null'],
        [['migrate'], file],
        [['keys', 'create'], join(file, 'data')],
      ] as const) {
        const r = await runCli(args, { env: { DATA_DIR: dataDir, PORT: '0' } });
        expect({ args, dataDir, code: r.code, stderr: r.stderr.trim() }).toEqual({ args, dataDir, code: 1, stderr: `mailtally: DATA_DIR: cannot use ${dataDir}: not a directory` });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // PGlite would create a database among another program's files, and over a damaged one of its
  // own as if it were new: the data would be gone without a word.
  it('a DATA_DIR holding files but no database, or a damaged one, exits 1 naming it and leaves its files as they were', { timeout: 180_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-foreign-'));
    try {
      const foreign = join(dir, 'foreign');
      mkdirSync(foreign);
      writeFileSync(join(foreign, 'notes.txt'), 'not a database');
      writeFileSync(join(foreign, '.gitkeep'), '');
      const before = readdirSync(foreign).sort();
      let r = await runCli(['migrate'], { env: { DATA_DIR: foreign } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^mailtally: DATA_DIR: ${foreign} holds files \\(.+\\) but no embedded database \\(it has no PG_VERSION\\): refusing to create one among them`));
      expect(readdirSync(foreign).sort()).toEqual(before);

      // A directory with only dot files is a new one.
      const fresh = join(dir, 'fresh');
      mkdirSync(fresh);
      writeFileSync(join(fresh, '.gitkeep'), '');
      expect((await runCli(['keys', 'create'], { env: { DATA_DIR: fresh } })).code).toBe(0);

      // That database, its PG_VERSION lost: refused, its files kept (the key is still there once it is back).
      const damaged = join(dir, 'damaged');
      cpSync(fresh, damaged, { recursive: true });
      rmSync(join(damaged, 'PG_VERSION'));
      r = await runCli(['keys', 'list'], { env: { DATA_DIR: damaged } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/DATA_DIR: .* holds files .* but no embedded database/);
      expect(existsSync(join(damaged, 'base'))).toBe(true);

      // Its control file overwritten: PGlite cannot open it, and the error names DATA_DIR.
      const broken = join(dir, 'broken');
      cpSync(fresh, broken, { recursive: true });
      writeFileSync(join(broken, 'global', 'pg_control'), Buffer.alloc(8192, 7));
      r = await runCli(['keys', 'list'], { env: { DATA_DIR: broken } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^mailtally: DATA_DIR: the embedded database in ${broken} could not be opened \\(.+\\)\\. Is it damaged`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('dead-letters prints raw bytes that are not UTF-8 as base64, as on Postgres', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-embedded-dl-'));
    try {
      const bad = Buffer.concat([Buffer.from('{"event":"sent","agent":"Moz'), Buffer.from([0xff, 0xfe]), Buffer.from('illa"}')]);
      const file = join(dir, 'bad.jsonl');
      writeFileSync(file, Buffer.concat([bad, Buffer.from('\n')]));
      const imported = await runCli(['import', file], { env: { DATA_DIR: join(dir, 'data') } });
      expect({ code: imported.code, stdout: imported.stdout.trim() }, imported.stderr).toEqual({ code: 3, stdout: '{"Imported":0,"Duplicates":0,"Rejected":1}' });

      const listed = await runCli(['dead-letters'], { env: { DATA_DIR: join(dir, 'data') } });
      expect(listed.code, listed.stderr).toBe(0);
      const letters = listed.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(letters).toMatchObject([{ source: 'import', reason: 'line 1: line is not valid UTF-8', encoding: 'base64', raw: bad.toString('base64') }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
