import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KeyVerifier, createApiKey } from '../../src/keys/key-store.js';
import { BIG_MESSAGE_ID } from '../support/events.js';
import { type TestEnv, createTestEnv, waitFor } from '../support/harness.js';
import { createStream, deleteStreamQuietly, openJetStream } from '../support/jetstream.js';
import { freePort, runCli, spawnCli, stopAll } from '../support/processes.js';
import { createTestDatabase } from '../support/services.js';

/** The `mailtally` CLI as users run it: child processes, stdout, exit codes, rows in the database. */

let t: TestEnv;
let dir: string;
let dbEnv: Record<string, string>;

beforeAll(async () => {
  t = await createTestEnv();
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  dbEnv = withoutNats;
  dir = mkdtempSync(join(tmpdir(), 'mailtally-cli-'));
});
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  if (t !== undefined) {
    await deleteStreamQuietly(t.env['NATS_URL'] as string, t.env['NATS_STREAM'] as string);
    await t.cleanup();
  }
  rmSync(dir, { recursive: true, force: true });
});

const event = (i: number, extra: Record<string, unknown> = {}) =>
  ({ event: ['sent', 'open', 'queued'][i % 3], time: 1_600_000_000 + i, MessageID: (BigInt(BIG_MESSAGE_ID) + BigInt(i)).toString(), email: `r${i}@example.com`, ...extra });
/** JSONL with MessageID as a bare 64-bit integer. */
const line = (e: Record<string, unknown>) => JSON.stringify(e).replace(/"MessageID":"(\d+)"/, '"MessageID":$1');
const countFor = async (apiKeyId: string) =>
  Number((await sql<{ n: bigint }>`SELECT count(*) AS n FROM events WHERE api_key_id = ${BigInt(apiKeyId)}`.execute(t.db.kysely)).rows[0]?.n);
const lastJson = (stdout: string): unknown => JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null');

describe('keys create', () => {
  it('prints exactly one JSON object with a working key', async () => {
    const r = await runCli(['keys', 'create'], { env: dbEnv });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const key = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(Object.keys(key)).toEqual(['APIKeyID', 'ApiKey', 'SecretKey', 'ReadOnly']);
    expect(key).toMatchObject({ ApiKey: expect.stringMatching(/^\w{16,}$/), SecretKey: expect.stringMatching(/^\w{16,}$/), ReadOnly: false });
    expect(String(key['APIKeyID'])).toMatch(/^[1-9]\d*$/);
    const principal = await new KeyVerifier(t.db.kysely).verify(String(key['ApiKey']), String(key['SecretKey']));
    expect(principal).toEqual({ apiKeyId: String(key['APIKeyID']), readOnly: false });
  });

  it('prints APIKeyID as a bare JSON integer, as 64-bit ids go on the wire (README, The read API)', async () => {
    const r = await runCli(['keys', 'create'], { env: dbEnv });
    expect(r.stdout.trim()).toMatch(/^\{"APIKeyID":[1-9]\d*,"ApiKey":"\w+","SecretKey":"\w+","ReadOnly":false\}$/);
  });

  it('--read-only makes a read-only key', async () => {
    const r = await runCli(['keys', 'create', '--read-only'], { env: dbEnv });
    expect(r.code, r.stderr).toBe(0);
    const key = JSON.parse(r.stdout) as { APIKeyID: unknown; ApiKey: string; SecretKey: string; ReadOnly: boolean };
    expect(key.ReadOnly).toBe(true);
    const row = await t.db.kysely.selectFrom('api_keys').select(['api_key_id', 'read_only']).where('public_key', '=', key.ApiKey).executeTakeFirst();
    expect(row).toEqual({ api_key_id: BigInt(String(key.APIKeyID)), read_only: true });
  });
});

describe('keys list and keys revoke', () => {
  it('lists every key without secrets, revokes one by ApiKey or APIKeyID (once), and exits 1 for a key that does not exist', async () => {
    const created = JSON.parse((await runCli(['keys', 'create'], { env: dbEnv })).stdout) as { APIKeyID: number; ApiKey: string; SecretKey: string };
    const listed = await runCli(['keys', 'list'], { env: dbEnv });
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    const mine = lines.find((l) => l.includes(created.ApiKey)) ?? '';
    expect(mine).toMatch(new RegExp(`^\\{"APIKeyID":${created.APIKeyID},"ApiKey":"${created.ApiKey}","ReadOnly":false,"CreatedAt":"[^"]+Z","RevokedAt":null\\}$`));
    expect(listed.stdout).not.toContain(created.SecretKey);
    expect(lines.every((l) => !('SecretKey' in (JSON.parse(l) as object)))).toBe(true);

    const revoked = await runCli(['keys', 'revoke', created.ApiKey], { env: dbEnv });
    expect(revoked.code, revoked.stderr).toBe(0);
    const first = JSON.parse(revoked.stdout) as { APIKeyID: number; RevokedAt: string | null };
    expect(first).toMatchObject({ APIKeyID: created.APIKeyID, RevokedAt: expect.stringMatching(/Z$/) });
    expect(await new KeyVerifier(t.db.kysely).verify(created.ApiKey, created.SecretKey)).toBeNull();
    const again = await runCli(['keys', 'revoke', String(created.APIKeyID)], { env: dbEnv });
    expect({ code: again.code, out: JSON.parse(again.stdout) as unknown }).toEqual({ code: 0, out: first });

    const none = await runCli(['keys', 'revoke', '987654321987'], { env: dbEnv });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/keys revoke: no API key "987654321987"/);
  });
});

describe('import', () => {
  // 2500 distinct events, 156 repeated lines, 42 lines of broken JSON, 41 invalid events, blank lines.
  const lines: string[] = [];
  const brokenJson: number[] = [];
  const invalid: number[] = [];
  for (let i = 0; i < 2500; i++) {
    lines.push(line(event(i, { EventID: `imp-${i}` })));
    if (i % 16 === 15) lines.push(line(event(i - 7, { EventID: `imp-${i - 7}` })));
    if (i % 60 === 30) brokenJson.push(lines.push(`{"event":"open","time":${i},`));
    if (i % 60 === 45) invalid.push(lines.push(line({ event: 'open', time: 1_600_000_000, MessageID: '1' })));
    if (i % 250 === 0) lines.push('');
  }
  const rejectLines = [...brokenJson, ...invalid].sort((a, b) => a - b);
  const file = () => join(dir, 'import.jsonl');

  it('loads a file: summary on stdout, rows in the log, rejects dead-lettered with line numbers, exit 3', async () => {
    expect([brokenJson.length, invalid.length]).toEqual([42, 41]);
    writeFileSync(file(), `${lines.join('\n')}\n`);
    const r = await runCli(['import', file(), '--api-key-id', t.key.APIKeyID, '--batch-size', '1000'], { env: dbEnv });
    expect(r.code, r.stderr).toBe(3);
    expect(lastJson(r.stdout)).toEqual({ Imported: 2500, Duplicates: 156, Rejected: 83 });

    const stored = await sql<{ n: bigint; d: bigint }>`
      SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM events WHERE event_id LIKE 'imp-%' AND api_key_id = ${BigInt(t.key.APIKeyID)}`.execute(t.db.kysely);
    expect(stored.rows[0]).toEqual({ n: 2500n, d: 2500n });
    const big = await sql<{ m: string; p: string }>`SELECT message_id::text AS m, payload->>'MessageID' AS p FROM events WHERE event_id = 'imp-0'`.execute(t.db.kysely);
    expect(big.rows).toEqual([{ m: BIG_MESSAGE_ID, p: BIG_MESSAGE_ID }]);

    const letters = await t.db.kysely.selectFrom('dead_letters').select(['source', 'reason', 'api_key_id']).where('source', '=', 'import').execute();
    expect(letters).toHaveLength(83);
    const numbers = letters.map((l) => Number(/^line (\d+): /.exec(l.reason)?.[1]));
    expect(numbers.sort((a, b) => a - b)).toEqual(rejectLines);
    expect(letters.filter((l) => /not valid JSON/.test(l.reason))).toHaveLength(42);
    expect(letters.filter((l) => /email: is required/.test(l.reason))).toHaveLength(41);
  });

  it('importing the same file again finds only duplicates', async () => {
    const r = await runCli(['import', file(), '--api-key-id', t.key.APIKeyID], { env: dbEnv });
    expect(r.code, r.stderr).toBe(3);
    expect(lastJson(r.stdout)).toEqual({ Imported: 0, Duplicates: 2656, Rejected: 83 });
    expect(await countFor(t.key.APIKeyID)).toBe(2500);
  });

  it('exits 0 when nothing is rejected', async () => {
    const clean = join(dir, 'clean.jsonl');
    writeFileSync(clean, Array.from({ length: 300 }, (_, i) => line(event(10_000 + i))).join('\n'));
    const key = await createApiKey(t.db.kysely);
    const first = await runCli(['import', clean, '--api-key-id', key.APIKeyID], { env: dbEnv });
    expect({ code: first.code, summary: lastJson(first.stdout) }).toEqual({ code: 0, summary: { Imported: 300, Duplicates: 0, Rejected: 0 } });
    const again = await runCli(['import', clean, '--api-key-id', key.APIKeyID], { env: dbEnv });
    expect({ code: again.code, summary: lastJson(again.stdout) }).toEqual({ code: 0, summary: { Imported: 0, Duplicates: 300, Rejected: 0 } });
    expect(await countFor(key.APIKeyID)).toBe(300);
  });
});

describe('Ctrl-C in import and publish', () => {
  const bigFile = (name: string, n: number) => {
    const path = join(dir, `${name}.jsonl`);
    writeFileSync(path, `${Array.from({ length: n }, (_, i) => line(event(i, { EventID: `${name}-${i}` }))).join('\n')}\n`);
    return path;
  };
  const stored = async (prefix: string) =>
    Number((await sql<{ n: bigint }>`SELECT count(*) AS n FROM events WHERE event_id LIKE ${`${prefix}-%`}`.execute(t.db.kysely)).rows[0]?.n);

  it('import: the first Ctrl-C stops the reading, writes what was read and sums it up (exit 130); a rerun stores the rest', { timeout: 120_000 }, async () => {
    const path = bigFile('ctrlc', 200_000);
    const run = spawnCli(['import', path, '--api-key-id', t.key.APIKeyID, '--batch-size', '200'], { env: dbEnv });
    await waitFor('the first batches in the log', async () => (await stored('ctrlc')) > 0, 60_000, 20);
    run.signal('SIGINT');
    const exit = await run.waitForExit(30_000);
    expect(exit.code, run.describe()).toBe(130);
    const summary = lastJson(run.stdout) as { Imported: number; Duplicates: number; Rejected: number };
    expect(summary.Imported).toBeGreaterThan(0);
    expect(summary.Imported).toBeLessThan(200_000);
    expect(summary.Imported).toBe(await stored('ctrlc'));
    expect(run.stderr).toMatch(/Stopping: what was read is still written/);
    expect(run.stderr).toMatch(/Interrupted: the summary above counts what was written; run import again for the rest \(what is stored already counts as Duplicates\)/);

    const again = await runCli(['import', path, '--api-key-id', t.key.APIKeyID, '--batch-size', '5000'], { env: dbEnv, timeoutMs: 90_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(lastJson(again.stdout)).toEqual({ Imported: 200_000 - summary.Imported, Duplicates: summary.Imported, Rejected: 0 });
  });

  it('publish to NATS: the first Ctrl-C stops the reading, waits for the acks of what was sent and sums it up (exit 130)', { timeout: 120_000 }, async () => {
    const path = bigFile('ctrlcpub', 200_000);
    const h = await openJetStream(t.env['NATS_URL'] as string);
    // A stream of its own (publish creates it), so the other tests' counts of theirs stand.
    const stream = `${t.env['NATS_STREAM'] as string}_CTRLC`;
    const env = { ...t.env, NATS_STREAM: stream, NATS_SUBJECT_PREFIX: `${t.env['NATS_SUBJECT_PREFIX'] as string}ctrlc` };
    const onStream = async () => (await h.jsm.streams.info(stream).catch(() => null))?.state.messages ?? 0;
    try {
      const run = spawnCli(['publish', path, '--api-key-id', t.key.APIKeyID], { env });
      await waitFor('the first messages on the stream', async () => (await onStream()) > 0, 60_000, 20);
      run.signal('SIGINT');
      const exit = await run.waitForExit(30_000);
      expect(exit.code, run.describe()).toBe(130);
      const summary = lastJson(run.stdout) as { Published: number; Duplicates: number; Skipped: unknown[] };
      expect(summary.Published).toBeGreaterThan(0);
      expect(summary.Published).toBeLessThan(200_000);
      expect(summary.Published).toBe(await onStream());
      // A rerun over NATS publishes every event again (the stream's dedupe window is 100 ms): not "Duplicates".
      expect(run.stderr).toMatch(/Interrupted: the summary above counts what was written; run publish again for the rest \(the log stores each event once; over NATS the rerun counts every event as Published again\)/);
    } finally {
      await h.close();
      await deleteStreamQuietly(t.env['NATS_URL'] as string, stream);
    }
  });
});

describe('dead-letters', () => {
  it('--limit 5 prints the five newest as JSON lines, oldest first', async () => {
    const r = await runCli(['dead-letters', '--limit', '5'], { env: dbEnv });
    expect(r.code, r.stderr).toBe(0);
    const printed = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const newest = await t.db.kysely.selectFrom('dead_letters').select('id').orderBy('id', 'desc').limit(5).execute();
    expect(printed.map((p) => p['id'])).toEqual(newest.map((n) => n.id.toString()).reverse());
    for (const p of printed) expect(p).toMatchObject({ source: 'import', reason: expect.stringMatching(/^line \d+: /), encoding: 'utf8', raw: expect.any(String) });
  });
});

// After `dead-letters`, whose test reads the newest dead letters (this one's raw bytes are not UTF-8).
describe('import: bytes', () => {
  it('skips a byte order mark and dead-letters a line that is not UTF-8 with its own bytes', async () => {
    const key = await createApiKey(t.db.kysely);
    const bad = Buffer.concat([Buffer.from(`${line(event(20_000)).slice(0, -1)},"agent":"Moz`), Buffer.from([0xff, 0xfe]), Buffer.from('illa"}')]);
    const path = join(dir, 'bytes.jsonl');
    writeFileSync(path, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${line(event(20_001))}\r\n`), bad, Buffer.from('\n')]));
    const r = await runCli(['import', path, '--api-key-id', key.APIKeyID], { env: dbEnv });
    expect({ code: r.code, summary: lastJson(r.stdout) }, r.stderr).toEqual({ code: 3, summary: { Imported: 1, Duplicates: 0, Rejected: 1 } });
    const letters = await t.db.kysely.selectFrom('dead_letters').select(['reason', 'raw']).where('source', '=', 'import').where('reason', 'like', 'line 2: %').execute();
    expect(letters.filter((l) => Buffer.from(l.raw).equals(bad)).map((l) => l.reason)).toEqual(['line 2: line is not valid UTF-8']);
  });
});

describe('publish', () => {
  const file = (name: string, n: number, bad: { at: number; text: string }) => {
    const out = Array.from({ length: n }, (_, i) => line(event(i, i % 5 === 0 ? {} : { EventID: `${name}-${i}` })));
    out.splice(bad.at - 1, 0, bad.text);
    const path = join(dir, `${name}.jsonl`);
    writeFileSync(path, `${out.join('\n')}\n`);
    return path;
  };

  it('with NATS_URL: one message per event on the stream, which a running ingest stores', { timeout: 90_000 }, async () => {
    const key = await createApiKey(t.db.kysely);
    const ingest = spawnCli(['serve', '--roles', 'ingest'], { env: { ...t.env, LOG_LEVEL: 'info' } });
    await ingest.serverUrl(); // the stream and consumer exist from here on
    const path = file('nats', 1200, { at: 601, text: '{"event":"open",' });

    const r = await runCli(['publish', path, '--api-key-id', key.APIKeyID], { env: t.env });
    expect(r.code, r.stderr).toBe(3);
    expect(lastJson(r.stdout)).toEqual({ Published: 1200, Duplicates: 0, Skipped: [{ Line: 601, Reason: 'not valid JSON' }] });
    const h = await openJetStream(t.env['NATS_URL'] as string);
    try {
      const info = await h.jsm.streams.info(t.env['NATS_STREAM'] as string);
      expect(info.state.messages).toBe(1200);
    } finally {
      await h.close();
    }
    await waitFor('the published events in the log', async () => (await countFor(key.APIKeyID)) >= 1200, 30_000, 100);
    expect(await countFor(key.APIKeyID)).toBe(1200);

    // Again, past the stream's 100 ms Nats-Msg-Id window: on the stream again, and the log's unique index drops them.
    const again = await runCli(['publish', path, '--api-key-id', key.APIKeyID], { env: t.env });
    expect(lastJson(again.stdout)).toMatchObject({ Published: 1200, Duplicates: 0 });
    const drained = await openJetStream(t.env['NATS_URL'] as string);
    try {
      await waitFor('the copies to be taken by ingest', async () => {
        const c = await drained.jsm.consumers.info(t.env['NATS_STREAM'] as string, t.env['NATS_CONSUMER'] as string);
        return c.num_pending === 0 && c.num_ack_pending === 0;
      }, 30_000, 100);
    } finally {
      await drained.close();
    }
    expect(await countFor(key.APIKeyID)).toBe(1200);
  });

  it('without NATS_URL: posts to HTTP ingest with MAILTALLY_API_KEY / MAILTALLY_SECRET_KEY', { timeout: 90_000 }, async () => {
    const key = await createApiKey(t.db.kysely);
    const port = String(await freePort());
    const server = spawnCli(['serve', '--roles', 'api,ingest'], { env: { ...dbEnv, PORT: port, LOG_LEVEL: 'info' } });
    await server.serverUrl();
    const path = file('http', 1500, { at: 700, text: line({ event: 'sent', time: 1_600_000_000, MessageID: '7' }) });

    const noKeys = await runCli(['publish', path], { env: { ...dbEnv, PORT: port } });
    expect(noKeys.code).toBe(1);
    expect(noKeys.stderr).toMatch(/MAILTALLY_API_KEY/);

    const env = { ...dbEnv, PORT: port, MAILTALLY_API_KEY: key.ApiKey, MAILTALLY_SECRET_KEY: key.SecretKey };
    // The tenant is the credentials': a flag naming one is refused, not ignored.
    const flagged = await runCli(['publish', path, '--api-key-id', '7'], { env });
    expect({ code: flagged.code, stderr: flagged.stderr }).toEqual({ code: 2, stderr: expect.stringMatching(/--api-key-id names the tenant on NATS only/) });
    const r = await runCli(['publish', path], { env });
    expect(r.code, r.stderr).toBe(3);
    expect(lastJson(r.stdout)).toEqual({ Published: 1500, Duplicates: 0, Skipped: [{ Line: 700, Reason: 'email: is required' }] });
    expect(await countFor(key.APIKeyID)).toBe(1500);
  });

  it('with NATS_URL: a stream the server will not create exits 1 with the reason (not a hang)', { timeout: 60_000 }, async () => {

    // Another stream already takes the subjects: the server refuses the new one, and says why.
    const stream = t.env['NATS_STREAM'] as string;
    const prefix = t.env['NATS_SUBJECT_PREFIX'] as string;
    const h = await openJetStream(t.env['NATS_URL'] as string);
    try {
      await h.jsm.streams.info(stream).catch(() => createStream(h, stream, prefix));
    } finally {
      await h.close();
    }
    const path = join(dir, 'overlap.jsonl');
    writeFileSync(path, `${line(event(1))}\n`);
    const overlap = await runCli(['publish', path, '--api-key-id', t.key.APIKeyID], { env: { ...t.env, NATS_STREAM: `${stream}_OTHER` }, timeoutMs: 20_000 });
    expect(overlap.code, overlap.stderr).toBe(1);
    expect(overlap.stderr).toMatch(new RegExp(`Could not create the NATS stream ${stream}_OTHER \\(NATS_STREAM\\) for subjects ${prefix.replace(/\./g, '\\.')}\\.> \\(NATS_SUBJECT_PREFIX\\): .*overlap`));
  });

  it('with NATS_URL and DATABASE_URL: an --api-key-id naming no key exits 2 before sending anything', async () => {
    const path = join(dir, 'nobody.jsonl');
    writeFileSync(path, `${line(event(1))}\n`);
    const r = await runCli(['publish', path, '--api-key-id', '987654321'], { env: t.env });
    expect({ code: r.code, out: r.stdout }).toEqual({ code: 2, out: '' });
    expect(r.stderr).toMatch(/^--api-key-id 987654321: no API key has this APIKeyID/);
  });

  it('without NATS_URL, to an address where nothing listens: exits 1 naming the URL, where it came from and the cause', async () => {
    const path = file('unreachable', 3, { at: 2, text: '{"event":"open",' });
    const port = await freePort();
    const env = { ...dbEnv, MAILTALLY_API_KEY: 'k', MAILTALLY_SECRET_KEY: 's' };
    const flagged = await runCli(['publish', path, '--url', `http://127.0.0.1:${port}`], { env });
    expect({ code: flagged.code, stderr: flagged.stderr.trim() }).toEqual({
      code: 1,
      stderr: `mailtally: publish: cannot reach the HTTP ingest at http://127.0.0.1:${port}/v1/events (--url): connect ECONNREFUSED 127.0.0.1:${port}`,
    });
    const fromEnv = await runCli(['publish', path], { env: { ...env, PORT: String(port) } });
    expect({ code: fromEnv.code, stderr: fromEnv.stderr.trim() }).toEqual({
      code: 1,
      stderr: `mailtally: publish: cannot reach the HTTP ingest at http://127.0.0.1:${port}/v1/events (HOST / PORT): connect ECONNREFUSED 127.0.0.1:${port}`,
    });
  });
});

describe('errors and migrate', () => {
  it('a bad env value exits 1 naming the variable', async () => {
    const r = await runCli(['migrate'], { env: { ...dbEnv, PORT: 'abc' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/PORT must be a whole number.*abc/);
  });

  it('an unknown command exits 2 with the usage', async () => {
    const r = await runCli(['frobnicate'], { env: dbEnv });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/Unknown command "frobnicate"/);
    expect(r.stderr).toMatch(/Usage: mailtally <command>/);
  });

  it('an unknown option, an option without its value or given twice, or a bad --roles exits 2 with the usage', async () => {
    for (const [args, message] of [
      [['serve', '--bogus'], /^Unknown option --bogus\n\nUsage:/],
      [['replay', '--projection', 'geo', '--projection', 'messages'], /^--projection is given twice; name several read models in one: --projection a,b\n\nUsage:/],
      [['import', 'events.jsonl', '--batch-size', '-5'], /Option '--batch-size' argument is ambiguous/],
      [['import', 'events.jsonl', '--batch-size=-5'], /--batch-size must be a positive whole number \(got "-5"\)/],
      [['serve', '--roles', 'api,bogus'], /Unknown role "bogus"/],
      [[], /Give a command/],
    ] as const) {
      const r = await runCli(args, { env: dbEnv });
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toMatch(/Usage: mailtally <command>/);
    }
  });

  it('publish --url with credentials or not http(s) is a usage error that does not repeat them', async () => {
    for (const [url, message] of [
      ['http://user:hunter2@127.0.0.1:3000', /--url must not carry credentials/],
      ['http://hunter2@127.0.0.1:3000', /--url must not carry credentials/],
      ['ftp://127.0.0.1/', /--url must be an absolute http\(s\) URL/],
      ['127.0.0.1:3000', /--url must be an absolute http\(s\) URL/],
    ] as const) {
      const r = await runCli(['publish', join(dir, 'none.jsonl'), '--url', url], { env: dbEnv });
      expect({ url, code: r.code }).toEqual({ url, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain('hunter2');
    }
  });

  it("an option or argument the command does not take exits 2 with the usage, naming both, before any work", async () => {
    const env = { ...dbEnv, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' };
    for (const [args, message] of [
      [['migrate', '--url', 'foo', '--limit', '3'], /migrate does not take --url \(it takes no options\)/],
      [['keys', 'create', '--projection', 'x'], /keys does not take --projection \(it takes --read-only\)/],
      [['dead-letters', '--read-only'], /dead-letters does not take --read-only \(it takes --limit\)/],
      [['serve', '--batch-size=5'], /serve does not take --batch-size \(it takes --roles\)/],
      [['import', 'events.jsonl', '--url', 'http://127.0.0.1:3000'], /import does not take --url \(it takes --api-key-id, --batch-size\)/],
      [['keys', 'create', 'extra'], /keys create does not take "extra"/],
      [['keys'], /keys: give a subcommand/],
      [['keys', 'delete', '1'], /keys: unknown subcommand "delete"/],
      [['keys', 'revoke'], /keys revoke: give the APIKeyID or the ApiKey/],
      [['keys', 'revoke', ''], /keys revoke: give the APIKeyID or the ApiKey/],
      [['keys', 'revoke', '1', '2'], /keys revoke takes one key \(got "2" too\)/],
      [['keys', 'list', 'all'], /keys list does not take "all"/],
      [['keys', 'list', '--read-only'], /keys list does not take --read-only/],
      [['migrate', 'now'], /migrate does not take "now"/],
      [['publish', 'a.jsonl', 'b.jsonl'], /publish takes one file \(got "b.jsonl" too\)/],
    ] as const) {
      const r = await runCli(args, { env });
      expect({ args, code: r.code }, r.stderr).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toMatch(/Usage: mailtally <command>/);
    }
  });

  it('a bad --api-key-id exits 2 with the usage, before any work', async () => {
    // No database at this address: a command that started its work would fail there (exit 1) instead.
    const env = { ...dbEnv, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' };
    for (const command of ['import', 'publish']) {
      for (const [value, message] of [
        ['0', /--api-key-id must be a positive 64-bit integer \(got "0"\)/],
        ['x', /--api-key-id must be a positive 64-bit integer \(got "x"\)/],
        ['99999999999999999999', /--api-key-id must be a positive 64-bit integer \(got "99999999999999999999"\)/],
        ['-1', /Option '--api-key-id' argument is ambiguous/],
      ] as const) {
        const r = await runCli([command, join(dir, 'none.jsonl'), '--api-key-id', value], { env });
        expect({ command, value, code: r.code }, r.stderr).toEqual({ command, value, code: 2 });
        expect(r.stderr).toMatch(message);
        expect(r.stderr).toMatch(/Usage: mailtally <command>/);
      }
      const r = await runCli([command, join(dir, 'none.jsonl'), '--api-key-id=-1'], { env });
      expect({ command, code: r.code, stderr: r.stderr }).toMatchObject({ command, code: 2, stderr: expect.stringMatching(/--api-key-id must be a positive 64-bit integer \(got "-1"\)/) });
    }
  });

  it('a file that is not there, or a directory, exits 2 with the usage, before any work', async () => {
    // No database at this address: a command that started its work would fail there (exit 1) instead.
    const env = { ...dbEnv, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' };
    for (const command of ['import', 'publish']) {
      const missing = await runCli([command, join(dir, 'no-such-file.jsonl')], { env });
      expect({ command, code: missing.code }, missing.stderr).toEqual({ command, code: 2 });
      expect(missing.stderr).toMatch(new RegExp(`^${command}: cannot read .*no-such-file\\.jsonl: no such file\n\nUsage: mailtally`));
      const directory = await runCli([command, dir], { env });
      expect({ command, code: directory.code }, directory.stderr).toEqual({ command, code: 2 });
      expect(directory.stderr).toMatch(new RegExp(`^${command}: .* is a directory; give the path of a \\.jsonl file`));
    }
  });

  it('import --api-key-id naming no key exits 2 before reading the file, dead-lettering nothing', async () => {
    const path = join(dir, 'for-no-key.jsonl');
    writeFileSync(path, `${line(event(1))}\n`);
    const letters = async () => Number((await t.db.kysely.selectFrom('dead_letters').select((e) => e.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const before = await letters();
    const r = await runCli(['import', path, '--api-key-id', '987654321'], { env: dbEnv });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^--api-key-id 987654321: no API key has this APIKeyID \(`keys list` shows them, `keys create` makes one\)/);
    expect(await letters()).toBe(before);
  });

  it('import or publish to NATS of a file whose events carry no APIKeyID, without --api-key-id, exits 2 before any work', async () => {
    const path = join(dir, 'no-tenant.jsonl');
    // Events as a producer without tenants writes them (event() puts no APIKeyID in).
    writeFileSync(path, `\n${line(event(1))}\n${line(event(2))}\n`);
    const letters = async () => Number((await t.db.kysely.selectFrom('dead_letters').select((e) => e.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const before = await letters();
    for (const [command, env] of [['import', dbEnv], ['publish', t.env]] as const) {
      const r = await runCli([command, path], { env });
      expect({ command, code: r.code }, r.stderr).toEqual({ command, code: 2 });
      expect(r.stderr).toMatch(new RegExp(`^${command}: line 2 of .*no-tenant\\.jsonl has no APIKeyID: pass --api-key-id N for a file whose events carry none, or put APIKeyID in each event\n`));
    }
    expect(await letters()).toBe(before);
    // With the flag, the same file goes in.
    const r = await runCli(['import', path, '--api-key-id', t.key.APIKeyID], { env: dbEnv });
    expect(r.code, r.stderr).toBe(0);
  });

  it('publish --url with NATS_URL set exits 2: the events would go to NATS', async () => {
    const r = await runCli(['publish', join(dir, 'none.jsonl'), '--url', 'http://127.0.0.1:3000'], { env: t.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^publish --url names the HTTP ingest, used without NATS_URL only; with NATS_URL set the events go to NATS\n/);
  });

  it('import --batch-size has a maximum, said before any work', async () => {
    const r = await runCli(['import', join(dir, 'none.jsonl'), '--batch-size', '300000'], { env: dbEnv });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--batch-size must be at most 50000 \(got 300000\)/);
  });

  it('--version (-v) prints the package`s version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) {
      const r = await runCli([flag], { env: dbEnv });
      expect({ code: r.code, out: r.stdout }).toEqual({ code: 0, out: `${version}\n` });
    }
  });

  it('--help says what each exit code means, and names publish --url', async () => {
    const r = await runCli(['--help'], { env: dbEnv });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/publish <file\.jsonl> \[--api-key-id N\] \[--url URL\]/);
    for (const code of ['0', '1', '2', '3', '130']) expect(r.stdout).toMatch(new RegExp(`^  ${code} +\\S`, 'm'));
  });

  it('<command> --help and help <command> give that command`s own usage, options and exit codes, doing nothing else', async () => {
    const commands = ['serve', 'migrate', 'keys', 'publish', 'import', 'replay', 'dead-letters'];
    for (const command of commands) {
      const flag = await runCli([command, '--help'], { env: { ...dbEnv, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' } });
      expect({ command, code: flag.code, stderr: flag.stderr }).toEqual({ command, code: 0, stderr: '' });
      expect(flag.stdout).toMatch(new RegExp(`^Usage: mailtally ${command}\\b`));
      expect(flag.stdout).toMatch(/^Exit codes: 0 /m);
      const named = await runCli(['help', command], { env: dbEnv });
      expect(named.stdout).toBe(flag.stdout);
    }
    // Options as the overview names them, with their defaults.
    expect((await runCli(['import', '--help'], { env: dbEnv })).stdout).toMatch(/--batch-size N +events per write \(default 5000, at most 50000\)/);
    expect((await runCli(['import', '--help'], { env: dbEnv })).stdout).toMatch(/INGEST_BATCH_BYTES/);
    const twice = await runCli(['import', '-h', '--help'], { env: dbEnv });
    expect({ code: twice.code, usage: twice.stdout.startsWith('Usage: mailtally import') }).toEqual({ code: 0, usage: true });
    expect((await runCli(['dead-letters', '-h'], { env: dbEnv })).stdout).toMatch(/--limit N +how many \(default 100\)/);
    // The overview points to them.
    expect((await runCli(['--help'], { env: dbEnv })).stdout).toMatch(/`mailtally <command> --help`/);
    const unknown = await runCli(['help', 'nope'], { env: dbEnv });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^No help for "nope": not a command\n\nUsage: mailtally <command>/);
  });

  it('migrate applies the schema to an empty database, then says it is up to date', async () => {
    const fresh = await createTestDatabase();
    try {
      const first = await runCli(['migrate'], { env: { ...dbEnv, DATABASE_URL: fresh.url } });
      expect({ code: first.code, out: first.stdout.trim() }).toEqual({ code: 0, out: 'applied: 0001-event-log\napplied: 0002-projections\napplied: 0003-webhooks\napplied: 0004-read-model-notify\napplied: 0005-hot-read-models\napplied: 0006-checkpoint-versions\napplied: 0007-custom-id-index\napplied: 0008-key-revocation-notify\napplied: 0009-callback-url-notify\napplied: 0010-batch-attempt-positions\napplied: 0011-counted-messages' });
      const again = await runCli(['migrate'], { env: { ...dbEnv, DATABASE_URL: fresh.url } });
      expect({ code: again.code, out: again.stdout.trim() }).toEqual({ code: 0, out: 'Schema is up to date.' });
      // The read models' tables are there too, empty.
      const db = new pg.Client({ connectionString: fresh.url });
      await db.connect();
      try {
        const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('statcounters', 'messages', 'open_info')");
        expect(rows[0]?.n).toBe(3);
      } finally {
        await db.end();
      }
    } finally {
      await fresh.drop();
    }
  });
});
