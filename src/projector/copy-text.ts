import type { Value } from '../../projections/kit/types.js';

/**
 * Rows in COPY's text format, encoded straight into byte chunks: no string or array per row,
 * so a rebuild's millions of rows leave almost nothing for the garbage collector. Each chunk
 * ends at a row boundary (it can be sent as a COPY of its own) and goes to `onChunk` once it
 * holds about `chunkBytes`.
 *
 * A row is `begin()`, then its fields (`values`, `padded`), then `end()`. Null is written as
 * `\N`, booleans as t / f, numbers in JavaScript's decimal form, text with backslash, tab,
 * newline and carriage return escaped.
 */
export class CopyText {
  private buf: Buffer;
  private pos = 0;
  private rowStart = 0;
  private fields = 0;
  private chunkRows = 0;
  /** Rows ended so far. */
  rows = 0;

  constructor(
    private readonly onChunk: (chunk: Buffer, rows: number) => void,
    private readonly chunkBytes = 1 << 20,
  ) {
    this.buf = Buffer.allocUnsafe(chunkBytes);
  }

  begin(): void {
    this.fields = 0;
  }

  values(values: readonly Value[]): void {
    for (let i = 0; i < values.length; i++) this.value(values[i] ?? null);
  }

  /** `values` cut or filled with nulls to `n` fields. */
  padded(values: readonly Value[], n: number): void {
    for (let i = 0; i < n; i++) this.value(values[i] ?? null);
  }

  end(): void {
    this.room(1);
    this.buf[this.pos++] = NEWLINE;
    this.rowStart = this.pos;
    this.rows += 1;
    this.chunkRows += 1;
    if (this.pos >= this.chunkBytes) this.emit(Buffer.allocUnsafe(this.chunkBytes));
  }

  /** Hands over the rows not yet in a chunk. */
  flush(): void {
    if (this.chunkRows > 0) this.emit(Buffer.allocUnsafe(this.chunkBytes));
  }

  value(v: Value): void {
    if (this.fields++ > 0) {
      this.room(1);
      this.buf[this.pos++] = TAB;
    }
    if (v === null) this.ascii('\\N');
    else if (typeof v === 'string') this.text(v);
    else if (typeof v === 'number') this.number(v);
    else this.ascii(v ? 't' : 'f');
  }

  private number(v: number): void {
    if (!Number.isSafeInteger(v)) {
      this.ascii(String(v));
      return;
    }
    this.room(17);
    const b = this.buf;
    let n = v;
    if (n < 0) {
      b[this.pos++] = MINUS;
      n = -n;
    }
    let digits = 1;
    while (digits < 16 && n >= (POW10[digits] as number)) digits++;
    let p = this.pos + digits;
    this.pos = p;
    // Above 2^31 - 1 in floating point; below in 32-bit integers (times in seconds, counts).
    for (; n > 0x7fffffff; n = Math.floor(n / 10)) b[--p] = ZERO + (n % 10);
    let i = n | 0;
    do {
      const q = (i / 10) | 0;
      b[--p] = ZERO + (i - q * 10);
      i = q;
    } while (i > 0);
  }

  /** Text known to be plain ASCII with nothing to escape. */
  private ascii(s: string): void {
    this.room(s.length);
    for (let i = 0; i < s.length; i++) this.buf[this.pos++] = s.charCodeAt(i);
  }

  private text(s: string): void {
    // Escaping at most doubles an ASCII character; UTF-8 takes at most 3 bytes per UTF-16 unit.
    this.room(3 * s.length);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        // Not ASCII: the rest through the UTF-8 encoder.
        const rest = s.slice(i);
        p += b.write(NEEDS_ESCAPE.test(rest) ? rest.replace(ESCAPES, escapeChar) : rest, p, 'utf8');
        break;
      }
      if (c === BACKSLASH || c === TAB || c === NEWLINE || c === RETURN) {
        b[p++] = BACKSLASH;
        b[p++] = c === BACKSLASH ? BACKSLASH : c === TAB ? LOWER_T : c === NEWLINE ? LOWER_N : LOWER_R;
      } else {
        b[p++] = c;
      }
    }
    this.pos = p;
  }

  /** Makes room for `n` more bytes, moving the row being written to a new chunk if needed. */
  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const partial = this.pos - this.rowStart;
    this.emit(Buffer.allocUnsafe(Math.max(this.chunkBytes, 2 * (partial + n))));
  }

  /** Hands over the complete rows and continues in `next` with the row being written, if any. */
  private emit(next: Buffer): void {
    const partial = this.buf.subarray(this.rowStart, this.pos);
    if (this.chunkRows > 0) this.onChunk(this.buf.subarray(0, this.rowStart), this.chunkRows);
    partial.copy(next);
    this.buf = next;
    this.pos = partial.length;
    this.rowStart = 0;
    this.chunkRows = 0;
  }
}

const POW10 = Array.from({ length: 17 }, (_, i) => 10 ** i);

const TAB = 9;
const NEWLINE = 10;
const RETURN = 13;
const MINUS = 45;
const ZERO = 48;
const BACKSLASH = 92;
const LOWER_N = 110;
const LOWER_R = 114;
const LOWER_T = 116;

const NEEDS_ESCAPE = /[\\\t\n\r]/;
const ESCAPES = /[\\\t\n\r]/g;
const escapeChar = (c: string): string => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r');
