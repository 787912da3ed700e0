import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { importFile } from '../../src/cli/import.js';
import { runPublish } from '../../src/cli/publish.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { type TestEnv, countRows, createTestEnv } from '../support/harness.js';
import { openJetStream } from '../support/jetstream.js';

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
});

/** Runs `publish` and returns the summary it printed. */
async function publish(path: string, config = t.config): Promise<{ code: number; summary: unknown }> {
  const printed: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line));
  try {
    const code = await runPublish(config, path, { apiKeyId: undefined, url: undefined });
    return { code, summary: JSON.parse(printed.at(-1) ?? 'null') };
  } finally {
    spy.mockRestore();
  }
}

describe('publish to NATS', () => {
  it("keeps two tenants' events that share an EventID (the stream dedupes Nats-Msg-Id across tenants)", async () => {
    const other = await createApiKey(t.db.kysely);
    const path = writeLines('shared-id.jsonl', [open(1, `"EventID":"evt-1","APIKeyID":${t.key.APIKeyID}`), open(1, `"EventID":"evt-1","APIKeyID":${other.APIKeyID}`)]);
    expect(await publish(path)).toEqual({ code: 0, summary: { Published: 2, Duplicates: 0, Skipped: [] } });
    const h = await openJetStream(t.env['NATS_URL'] as string);
    try {
      expect((await h.jsm.streams.info(t.env['NATS_STREAM'] as string)).state.messages).toBe(2);
    } finally {
      await h.close();
    }
    // the same file again: each tenant's copy is the duplicate of its own
    expect(await publish(path)).toEqual({ code: 0, summary: { Published: 0, Duplicates: 2, Skipped: [] } });
  });
});
