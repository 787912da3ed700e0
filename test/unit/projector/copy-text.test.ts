import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Value } from '../../../projections/kit/types.js';
import { CopyText } from '../../../src/projector/copy-text.js';

/** COPY text of rows the plain way: one string per row. */
function expected(rows: readonly (readonly Value[])[]): string {
  const field = (v: Value) =>
    v === null ? '\\N' : typeof v === 'boolean' ? (v ? 't' : 'f') : typeof v === 'number' ? String(v) : v.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c] ?? c);
  return rows.map((r) => `${r.map(field).join('\t')}\n`).join('');
}

function encode(rows: readonly (readonly Value[])[], chunkBytes: number): { chunks: Buffer[]; rows: number[] } {
  const chunks: Buffer[] = [];
  const counts: number[] = [];
  const text = new CopyText((chunk, n) => {
    chunks.push(Buffer.from(chunk));
    counts.push(n);
  }, chunkBytes);
  for (const r of rows) {
    text.begin();
    text.values(r);
    text.end();
  }
  text.flush();
  return { chunks, rows: counts };
}

const value = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 }),
  fc.maxSafeInteger(),
  fc.double({ noNaN: false }),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('a', '\\', '\t', '\n', '\r', 'é', '😀', 'N') }),
);

describe('CopyText', () => {
  it('writes what one string per row would, in chunks that end at row boundaries', () => {
    fc.assert(
      fc.property(fc.array(fc.array(value, { minLength: 1, maxLength: 6 }), { maxLength: 40 }), fc.integer({ min: 8, max: 200 }), (rows, chunkBytes) => {
        const out = encode(rows, chunkBytes);
        // Compared as UTF-8 bytes (a lone surrogate becomes U+FFFD either way).
        expect(Buffer.concat(out.chunks).equals(Buffer.from(expected(rows), 'utf8'))).toBe(true);
        expect(out.rows.reduce((a, b) => a + b, 0)).toBe(rows.length);
        for (const [i, c] of out.chunks.entries()) {
          expect(c.at(-1)).toBe(0x0a);
          expect(c.filter((b) => b === 0x0a).length).toBe(out.rows[i]);
        }
      }),
    );
  });

  it('pads and cuts to a number of fields', () => {
    const chunks: string[] = [];
    const text = new CopyText((chunk) => chunks.push(chunk.toString()));
    text.begin();
    text.values(['a']);
    text.padded([1, 2, 3], 2);
    text.padded([], 2);
    text.end();
    text.flush();
    expect(chunks).toEqual(['a\t1\t2\t\\N\t\\N\n']);
  });
});
