import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type JsonLine, openJsonLines } from '../../../src/cli/jsonl.js';
import { MAX_EVENT_BYTES } from '../../../src/events/decode.js';

const dir = mkdtempSync(join(tmpdir(), 'mailtally-jsonl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function read(name: string, bytes: Buffer): Promise<JsonLine[]> {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  const out: JsonLine[] = [];
  for await (const l of openJsonLines(path).lines) out.push(l);
  return out;
}

describe('openJsonLines', () => {
  it('skips a byte order mark and blank lines, takes \\r\\n as \\n and a last line without one', async () => {
    const lines = await read('bom.jsonl', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\r\n\r\n  \n{"b":"é"}')]));
    expect(lines.map(({ lineNo, text, problem }) => ({ lineNo, text, problem }))).toEqual([
      { lineNo: 1, text: '{"a":1}', problem: undefined },
      { lineNo: 4, text: '{"b":"é"}', problem: undefined },
    ]);
  });

  it('gives a line that is not UTF-8 a problem and keeps its bytes, never U+FFFD in their place', async () => {
    const bad = Buffer.concat([Buffer.from('{"agent":"Moz'), Buffer.from([0xff, 0xfe]), Buffer.from('illa"}')]);
    const lines = await read('bad.jsonl', Buffer.concat([Buffer.from('{"a":1}\n'), bad, Buffer.from('\n{"c":3}\n')]));
    expect(lines.map((l) => [l.lineNo, l.problem])).toEqual([
      [1, undefined],
      [2, 'line is not valid UTF-8'],
      [3, undefined],
    ]);
    expect(Buffer.from((lines[1] as JsonLine).bytes).equals(bad)).toBe(true);
  });

  it('decodes a character whose bytes straddle two reads', async () => {
    // The file is read 1 MiB at a time: put a two-byte character across that boundary, in the
    // second line (the first, with its line end, takes 1 MiB − 7 bytes; `é` is at 6 in the second).
    const first = `{"x":"${'a'.repeat(1024 * 1024 - 16)}"}`;
    const lines = await read('big.jsonl', Buffer.from(`${first}\n{"y":"é"}\n{"z":2}\n`));
    expect(lines.map((l) => [l.lineNo, l.problem, l.text.length])).toEqual([
      [1, undefined, first.length],
      [2, undefined, 9],
      [3, undefined, 7],
    ]);
    expect((lines[1] as JsonLine).text).toBe('{"y":"é"}');
  });

  it('takes an event of exactly the most an event may be, after a byte order mark and before \\r\\n, and refuses one byte more', async () => {
    const exact = `{"pad":"${'x'.repeat(MAX_EVENT_BYTES - 10)}"}`;
    const over = `{"pad":"${'x'.repeat(MAX_EVENT_BYTES - 9)}"}`;
    expect(exact.length).toBe(MAX_EVENT_BYTES);
    const lines = await read('exact.jsonl', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${exact}\r\n${exact}\r\n${over}\r\n`)]));
    expect(lines.map((l) => [l.lineNo, l.problem, l.text.length, l.bytes.length])).toEqual([
      [1, undefined, MAX_EVENT_BYTES, MAX_EVENT_BYTES],
      [2, undefined, MAX_EVENT_BYTES, MAX_EVENT_BYTES],
      [3, `event is ${MAX_EVENT_BYTES + 1} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take`, 0, MAX_EVENT_BYTES],
    ]);
    expect(Buffer.from((lines[2] as JsonLine).bytes).equals(Buffer.from(over.slice(0, MAX_EVENT_BYTES)))).toBe(true);
  });

  it('gives a line longer than an event may be a problem and only its first MiB, never holding it whole', async () => {
    const long = `{"pad":"${'x'.repeat(5 * 1024 * 1024)}"}`;
    const lines = await read('long.jsonl', Buffer.from(`{"a":1}\n${long}\n{"b":2}\n`));
    expect(lines.map((l) => [l.lineNo, l.problem, l.text])).toEqual([
      [1, undefined, '{"a":1}'],
      [2, `event is ${long.length} bytes, over the ${MAX_EVENT_BYTES} (1 MiB) an event may take`, ''],
      [3, undefined, '{"b":2}'],
    ]);
    expect(Buffer.from((lines[1] as JsonLine).bytes).equals(Buffer.from(long.slice(0, MAX_EVENT_BYTES)))).toBe(true);
  });
});
