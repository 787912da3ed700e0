import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { importFile } from '../../src/cli/import.js';
import { runDeadLetters } from '../../src/cli/dead-letters.js';
import { runPublish } from '../../src/cli/publish.js';
import { type Config, loadConfig } from '../../src/config.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { writeDeadLetters } from '../../src/log/dead-letters.js';
import { type Service, startService } from '../../src/main.js';
import { type TestEnv, countRows, createTestEnv, quietLogger } from '../support/harness.js';
import { createStream, deleteStreamQuietly, openJetStream } from '../support/jetstream.js';
import { postgresBehindProxy } from '../support/tcp-proxy.js';

/** The `import` and `publish` commands called in-process, against this file's database and stream. */

let t: TestEnv;
let dir: string;

beforeAll(async () => {
  t = await createTestEnv();
  dir = mkdtempSync(join(tmpdir(), 'mailtally-cli-in-'));
});
afterAll(async () => {
  await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const open = (i: number, extra: string) => `{"event":"open","time":${1_600_000_000 + i},"MessageID":${1000 + i},"email":"r${i}@example.com",${extra}}`;

function writeLines(name: string, lines: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

describe('import', () => {
  it('dead-letters a line whose APIKeyID is beyond int64 (no tenant) and imports the lines after it', async () => {
    const key = t.key.APIKeyID;
    const path = writeLines('big-key.jsonl', [
      open(1, `"EventID":"k-1","APIKeyID":${key}`),
      open(2, '"EventID":"k-2","APIKeyID":99999999999999999999'),
      open(3, '"EventID":"k-3","APIKeyID":1e30'),
      open(4, '"EventID":"k-4","APIKeyID":"9223372036854775808"'),
      open(5, `"EventID":"k-5","APIKeyID":${key}`),
    ]);
    const summary = await importFile(t.db, path, { apiKeyId: undefined, batchSize: 1000, pipeline: 1, quiet: true });
    expect(summary).toEqual({ Imported: 2, Duplicates: 0, Rejected: 3 });
    const letters = await t.db.kysely.selectFrom('dead_letters').select(['reason', 'api_key_id']).where('source', '=', 'import').orderBy('id').execute();
    expect(letters).toEqual([2, 3, 4].map((n) => ({ reason: `line ${n}: APIKeyID: must be a positive 64-bit integer`, api_key_id: null })));
    expect(await countRows(t.db, 'events')).toBe(2);
  });

  it('takes an APIKeyID spelled with leading zeros or spaces, as HTTP ingest does, and calls a line that is no object so', async () => {
    const key = t.key.APIKeyID;
    const path = writeLines('key-spellings.jsonl', [open(40, `"EventID":"ks-1","APIKeyID":"0${key}"`), open(41, `"EventID":"ks-2","APIKeyID":" ${key} "`), '[1]']);
    const summary = await importFile(t.db, path, { apiKeyId: undefined, batchSize: 1000, pipeline: 1, quiet: true });
    expect(summary).toEqual({ Imported: 2, Duplicates: 0, Rejected: 1 });
    const letters = await t.db.kysely.selectFrom('dead_letters').select('reason').where('source', '=', 'import').where('raw', '=', Buffer.from('[1]')).execute();
    expect(letters.map((l) => l.reason)).toEqual(['line 3: event must be a JSON object']);
  });

  it('stores a rejected line once when the file is imported again', async () => {
    const bad = ['{"event":"open",', open(11, '"EventID":"again-2","email":7')];
    const path = writeLines('again.jsonl', [open(10, '"EventID":"again-1"'), ...bad]);
    const lettersFor = async () =>
      (await t.db.kysely.selectFrom('dead_letters').select(['reason', 'api_key_id']).where('source', '=', 'import').where('raw', 'in', bad.map((b) => Buffer.from(b))).execute()).map(
        (l) => `${l.reason.slice(0, 7)} ${l.api_key_id}`,
      );
    const first = await importFile(t.db, path, { apiKeyId: t.key.APIKeyID, batchSize: 1000, pipeline: 1, quiet: true });
    const again = await importFile(t.db, path, { apiKeyId: t.key.APIKeyID, batchSize: 1000, pipeline: 1, quiet: true });
    expect([first, again]).toEqual([
      { Imported: 1, Duplicates: 0, Rejected: 2 },
      { Imported: 0, Duplicates: 1, Rejected: 2 },
    ]);
    // Each the flag's tenant's, the line that is not JSON too.
    expect((await lettersFor()).sort()).toEqual([`line 2: ${t.key.APIKeyID}`, `line 3: ${t.key.APIKeyID}`]);
  });

  it('seals a write at its bytes as well as at its lines', async () => {
    const pad = 'x'.repeat(4000);
    const lines = Array.from({ length: 6 }, (_, i) => open(30 + i, `"EventID":"bytes-${i}","pad":"${pad}"`));
    const writes = async () =>
      Number((await sql<{ n: string }>`SELECT count(DISTINCT xmin::text) AS n FROM events WHERE event_id LIKE 'bytes-%'`.execute(t.db.kysely)).rows[0]?.n);
    // 6 lines of about 4 KB, a write sealed once it holds 8 KB: 3 writes (one transaction each) of 2 lines.
    const summary = await importFile(t.db, writeLines('bytes.jsonl', lines), { apiKeyId: t.key.APIKeyID, batchSize: 1000, batchBytes: 8000, pipeline: 1, quiet: true });
    expect(summary).toEqual({ Imported: 6, Duplicates: 0, Rejected: 0 });
    expect(await writes()).toBe(3);
  });

  it('dead-letters a line nested too deep or holding a number jsonb would write out in full, and imports the lines around it', async () => {
    const deep = 100_000;
    const path = writeLines('unreadable.jsonl', [
      open(20, '"EventID":"u-1"'),
      open(21, `"EventID":"u-2","x":${'{"a":'.repeat(deep)}1${'}'.repeat(deep)}`),
      open(22, '"EventID":"u-3","x":[1e131000]'),
      open(23, '"EventID":"u-4"'),
    ]);
    const summary = await importFile(t.db, path, { apiKeyId: t.key.APIKeyID, batchSize: 1000, pipeline: 1, quiet: true });
    expect(summary).toEqual({ Imported: 2, Duplicates: 0, Rejected: 2 });
    const letters = await t.db.kysely
      .selectFrom('dead_letters')
      .select('reason')
      .where('source', '=', 'import')
      .where('reason', 'like', 'line _: event %')
      .where('reason', 'not like', '%JSON object')
      .orderBy('id')
      .execute();
    expect(letters.map((l) => l.reason)).toEqual([
      'line 2: event nests arrays or objects deeper than 64 levels',
      'line 3: event holds a number with an exponent beyond ±400, which the log would store written out in full',
    ]);
  });
});

/** What a command printed with console.log, line by line, and its exit code. */
async function printedBy(run: () => Promise<number>): Promise<{ code: number; printed: string[] }> {
  const printed: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line));
  try {
    return { code: await run(), printed };
  } finally {
    spy.mockRestore();
  }
}

/** Runs `publish` and returns the summary it printed. */
async function publish(path: string, config = t.config): Promise<{ code: number; summary: unknown }> {
  const { code, printed } = await printedBy(() => runPublish(config, path, { apiKeyId: undefined, url: undefined }));
  return { code, summary: JSON.parse(printed.at(-1) ?? 'null') };
}

describe('publish to NATS', () => {
  it("keeps two tenants' events that share an EventID (the stream dedupes Nats-Msg-Id across tenants)", async () => {
    const other = await createApiKey(t.db.kysely);
    const path = writeLines('shared-id.jsonl', [open(1, `"EventID":"evt-1","APIKeyID":${t.key.APIKeyID}`), open(1, `"EventID":"evt-1","APIKeyID":${other.APIKeyID}`)]);
    const h = await openJetStream(t.env['NATS_URL'] as string);
    try {
      // A stream an operator made, with NATS's default 2-minute window (the service's own has 100 ms).
      await deleteStreamQuietly(t.env['NATS_URL'] as string, t.env['NATS_STREAM'] as string);
      await createStream(h, t.env['NATS_STREAM'] as string, t.env['NATS_SUBJECT_PREFIX'] as string);
      expect(await publish(path)).toEqual({ code: 0, summary: { Published: 2, Duplicates: 0, Skipped: [] } });
      expect((await h.jsm.streams.info(t.env['NATS_STREAM'] as string)).state.messages).toBe(2);
    } finally {
      await h.close();
    }
    // the same file again: each tenant's copy is the duplicate of its own
    expect(await publish(path)).toEqual({ code: 0, summary: { Published: 0, Duplicates: 2, Skipped: [] } });
  });

  it('publishes an event whose EventID holds a line break, which a NATS header cannot carry', async () => {
    const path = writeLines('crlf-id.jsonl', [open(20, `"EventID":"a\\r\\nb","APIKeyID":${t.key.APIKeyID}`)]);
    expect(await publish(path)).toEqual({ code: 0, summary: { Published: 1, Duplicates: 0, Skipped: [] } });
  });

  it("skips a line over the server's message limit or nested too deep, says why, and publishes the rest", async () => {
    const key = `"APIKeyID":${t.key.APIKeyID}`;
    const path = writeLines('skips.jsonl', [
      open(30, `"EventID":"p-1",${key}`),
      open(31, `"EventID":"p-2",${key},"pad":"${'x'.repeat(1_100_000)}"`),
      open(32, `"EventID":"p-3",${key},"x":${'['.repeat(5000)}${']'.repeat(5000)}`),
      ...Array.from({ length: 300 }, (_, i) => open(40 + i, `"EventID":"p-${4 + i}",${key}`)),
    ]);
    const { code, summary } = await publish(path);
    expect(code).toBe(3);
    expect(summary).toEqual({
      Published: 301,
      Duplicates: 0,
      Skipped: [
        { Line: 2, Reason: expect.stringMatching(/^event is 1100\d+ bytes, over the 1048576 \(1 MiB\) an event may take$/) },
        { Line: 3, Reason: 'event nests arrays or objects deeper than 64 levels' },
      ],
    });
  });
});

describe('publish over HTTP', () => {
  let service: Service;
  let config: Config;
  beforeAll(async () => {
    const { NATS_URL: _nats, ...withoutNats } = t.env;
    service = await startService(loadConfig(withoutNats), ['ingest'], quietLogger());
    const port = new URL(service.url as string).port;
    config = loadConfig({ ...withoutNats, PORT: port, MAILTALLY_API_KEY: t.key.ApiKey, MAILTALLY_SECRET_KEY: t.key.SecretKey });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('splits a batch whose body would pass the 16 MiB limit', { timeout: 120_000 }, async () => {
    // 1000 events of about 17 KB: 17 MB in the 1000 events of one request by count.
    const pad = 'x'.repeat(17_000);
    const path = writeLines('large.jsonl', Array.from({ length: 1000 }, (_, i) => open(100 + i, `"EventID":"large-${i}","Payload":"${pad}"`)));
    expect(await publish(path, config)).toEqual({ code: 0, summary: { Published: 1000, Duplicates: 0, Skipped: [] } });
    const n = await t.db.kysely.selectFrom('events').select((eb) => eb.fn.countAll<string>().as('n')).where('event_id', 'like', 'large-%').executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(1000);
  });

  it('stores a rejected event once when it is sent again', async () => {
    const path = writeLines('http-again.jsonl', [open(5000, '"EventID":"http-again-1"'), '{"event":"open","time":1600000000,"MessageID":5,"EventID":"http-bad"}']);
    const skipped = [{ Line: 2, Reason: 'email: is required' }];
    expect(await publish(path, config)).toEqual({ code: 3, summary: { Published: 1, Duplicates: 0, Skipped: skipped } });
    expect(await publish(path, config)).toEqual({ code: 3, summary: { Published: 0, Duplicates: 1, Skipped: skipped } });
    const letters = await t.db.kysely.selectFrom('dead_letters').select('id').where('source', '=', 'http').where('raw', '=', Buffer.from('{"event":"open","time":1600000000,"MessageID":5,"EventID":"http-bad"}')).execute();
    expect(letters).toHaveLength(1);
  });

  it('sends a batch again when the ingest answers 503 (its database away) instead of giving up', { timeout: 60_000 }, async () => {
    const { proxy, url: viaProxy } = await postgresBehindProxy(t.env['DATABASE_URL'] as string);
    const { NATS_URL: _nats, ...withoutNats } = t.env;
    const flaky = await startService(loadConfig({ ...withoutNats, DATABASE_URL: viaProxy.toString() }), ['ingest'], quietLogger());
    try {
      const path = writeLines('outage.jsonl', Array.from({ length: 20 }, (_, i) => open(6000 + i, `"EventID":"outage-${i}"`)));
      await proxy.cut();
      const published = publish(path, { ...config, http: { ...config.http, port: Number(new URL(flaky.url as string).port) } });
      await new Promise((r) => setTimeout(r, 2500));
      await proxy.restore();
      expect(await published).toEqual({ code: 0, summary: { Published: 20, Duplicates: 0, Skipped: [] } });
    } finally {
      await flaky.stop();
      await proxy.stop();
    }
  });
});

describe('publish over HTTP to an ingest that fails part-way', () => {
  /** A real HTTP server answering POST /v1/events as `answer` says, request by request. */
  async function ingestServer(answer: (request: number, events: unknown[]) => { status: number; body: unknown }): Promise<{ server: Server; port: number }> {
    let requests = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { status, body } = answer(++requests, JSON.parse(Buffer.concat(chunks).toString()) as unknown[]);
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as AddressInfo).port };
  }
  const configFor = (port: number) => {
    const { NATS_URL: _nats, ...withoutNats } = t.env;
    return loadConfig({ ...withoutNats, PORT: String(port), MAILTALLY_API_KEY: t.key.ApiKey, MAILTALLY_SECRET_KEY: t.key.SecretKey });
  };

  it('prints what it sent before the failure, the first line not sent, and fails saying how to go on', async () => {
    const { server, port } = await ingestServer((n, events) =>
      n === 1 ? { status: 200, body: { Accepted: events.length - 1, Duplicates: 0, Rejected: 1, Errors: [{ Index: 3, Reason: 'email: is required' }] } } : { status: 500, body: { ErrorMessage: 'Internal Server Error', StatusCode: 500 } },
    );
    try {
      const path = writeLines('part-way.jsonl', Array.from({ length: 2500 }, (_, i) => open(20_000 + i, `"EventID":"part-way-${i}"`)));
      const printed: string[] = [];
      const spy = vi.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line));
      try {
        await expect(runPublish(configFor(port), path, { apiKeyId: undefined, url: undefined })).rejects.toThrow(
          /^POST \/v1\/events answered 500: Internal Server Error; lines before 1001 were sent \(the summary above counts them\): run it again once the server answers, what is stored already counting as Duplicates$/,
        );
      } finally {
        spy.mockRestore();
      }
      expect(printed.map((l) => JSON.parse(l) as unknown)).toEqual([{ Published: 999, Duplicates: 0, Skipped: [{ Line: 4, Reason: 'email: is required' }], StoppedAtLine: 1001 }]);
    } finally {
      server.close();
    }
  });

  it('lists the lines it skipped and those the ingest rejected in line order', async () => {
    const { server, port } = await ingestServer((_n, events) => ({ status: 200, body: { Accepted: events.length - 1, Duplicates: 0, Rejected: 1, Errors: [{ Index: 2, Reason: 'email: is required' }] } }));
    try {
      const lines = Array.from({ length: 12 }, (_, i) => open(30_000 + i, `"EventID":"order-${i}"`));
      lines[9] = '{not json';
      // Nested past what the parser's stack takes: told as over NATS, not as invalid JSON.
      lines[10] = `{"event":"open","x":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
      const path = writeLines('order.jsonl', lines);
      const { code, summary } = await publish(path, configFor(port));
      expect({ code, summary }).toEqual({
        code: 3,
        summary: {
          Published: 9,
          Duplicates: 0,
          Skipped: [
            { Line: 3, Reason: 'email: is required' },
            { Line: 10, Reason: 'not valid JSON' },
            { Line: 11, Reason: 'event nests arrays or objects deeper than 64 levels' },
          ],
        },
      });
    } finally {
      server.close();
    }
  });
});

describe('dead-letters', () => {
  it("prints a NATS dead letter's stream sequence", async () => {
    await writeDeadLetters(t.db.kysely, [{ source: 'nats', subject: 'x.1.open', nats_seq: 4242, message_key: 'S/4242/1', api_key_id: t.key.APIKeyID, reason: 'not valid JSON', raw: Buffer.from('{') }]);
    const { code, printed } = await printedBy(() => runDeadLetters(t.config, 1));
    expect(code).toBe(0);
    expect(JSON.parse(printed.at(-1) ?? 'null')).toMatchObject({ source: 'nats', subject: 'x.1.open', natsSeq: '4242', reason: 'not valid JSON', raw: '{' });
  });
});
