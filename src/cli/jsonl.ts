import { createReadStream, statSync } from 'node:fs';
import { createInterface } from 'node:readline';

export interface JsonLine {
  lineNo: number;
  text: string;
}

/** The non-blank lines of a JSONL file, with the bytes read so far for progress reporting. */
export function openJsonLines(path: string): { size: number; bytesRead: () => number; lines: AsyncIterable<JsonLine> } {
  const size = statSync(path).size;
  const stream = createReadStream(path, { highWaterMark: 1024 * 1024 });
  let bytes = 0;
  stream.on('data', (chunk) => {
    bytes += chunk.length;
  });
  const rl = createInterface({ input: stream, crlfDelay: Infinity });
  async function* lines(): AsyncGenerator<JsonLine> {
    let lineNo = 0;
    for await (const text of rl) {
      lineNo++;
      if (text.trim() !== '') yield { lineNo, text };
    }
  }
  return { size, bytesRead: () => bytes, lines: lines() };
}

/** The tenant of a line: the --api-key-id flag, else the event's own APIKeyID. */
export function lineTenant(value: unknown, flag: string | undefined): string | null {
  if (flag !== undefined) return flag;
  const id = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)['APIKeyID'] : undefined;
  return (typeof id === 'number' && Number.isInteger(id)) || typeof id === 'bigint' || (typeof id === 'string' && /^\d+$/.test(id))
    ? String(id)
    : null;
}
