import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importFile } from '../../src/cli/import.js';
import { type TestEnv, countRows, createTestEnv } from '../support/harness.js';

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
