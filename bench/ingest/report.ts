import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { MachineLoad } from '../support/proc.js';
import type { NatsOnlyResult } from './nats-only.js';
import type { IngestRunResult } from './product.js';

export interface RunFigures {
  rawCopy: { ms: number; rows: number; machine: MachineLoad };
  natsOnly: NatsOnlyResult & { machine: MachineLoad };
  ingest: IngestRunResult & { mismatches: number; source: ReturnType<typeof sourceVersion> };
}

export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The commit measured, and uncommitted changes to what the product runs. */
export function sourceVersion(): { commit: string; uncommitted: string[] } {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    return { commit: git('rev-parse', '--short', 'HEAD'), uncommitted: git('status', '--porcelain', '--', 'src', 'bin', 'package.json').split('\n').filter((l) => l !== '') };
  } catch {
    return { commit: 'unknown', uncommitted: [] };
  }
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

export interface Rates {
  rawCopyRowsPerSec: number[];
  natsOnlyMsgsPerSec: number[];
  ingestEventsPerSec: number[];
  ingestRowsPerSec: number[];
}

/** Every rate is "what the phase handled / its time": COPY writes the distinct rows, NATS and ingest take every message. */
export function rates(runs: readonly RunFigures[], events: number): Rates {
  return {
    rawCopyRowsPerSec: runs.map((r) => (r.rawCopy.rows * 1000) / r.rawCopy.ms),
    natsOnlyMsgsPerSec: runs.map((r) => (r.natsOnly.received * 1000) / r.natsOnly.ms),
    ingestEventsPerSec: runs.map((r) => (events * 1000) / r.ingest.ms),
    ingestRowsPerSec: runs.map((r) => (r.ingest.stored * 1000) / r.ingest.ms),
  };
}

const k = (x: number) => (Number.isFinite(x) ? `${(x / 1000).toFixed(1)}k` : '-');
const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;
const pct = (x: number) => `${(100 * x).toFixed(0)}%`;

export function formatTable(runs: readonly RunFigures[], events: number): string {
  const r = rates(runs, events);
  const copy = median(r.rawCopyRowsPerSec);
  const rows: string[][] = [['phase', ...runs.map((_, i) => `run ${i + 1}`), 'median', 'vs raw COPY']];
  const line = (name: string, xs: number[], fmt: (x: number) => string, ratio: boolean) =>
    rows.push([name, ...xs.map(fmt), fmt(median(xs)), ratio ? (median(xs) / copy).toFixed(2) : '']);
  line('raw COPY, distinct rows/s', r.rawCopyRowsPerSec, k, true);
  line('NATS only, msgs/s', r.natsOnlyMsgsPerSec, k, true);
  line('ingest, stored rows/s', r.ingestRowsPerSec, k, true);
  line('ingest, events/s (dups incl.)', r.ingestEventsPerSec, k, true);
  line('ingest: rolled-back transactions', runs.map((x) => x.ingest.rollbacks), String, false);
  line('ingest RSS at first row', runs.map((x) => x.ingest.rssAtFirstRowKb ?? NaN), mib, false);
  line('ingest peak RSS', runs.map((x) => x.ingest.peakRssKb ?? NaN), mib, false);
  const share = (pick: (c: IngestRunResult['cpuMs']) => number) => runs.map((x) => pick(x.ingest.cpuMs) / x.ingest.ms);
  line('CPU in drain: ingest process', share((c) => c.ingest), pct, false);
  line('CPU in drain: its PG backends', share((c) => c.postgres), pct, false);
  line('CPU in drain: nats-server', share((c) => c.nats), pct, false);
  line('CPU in drain: bench poller', share((c) => c.poller), pct, false);
  line('CPU in drain: rest of the box', share((c) => c.others), pct, false);
  line('CPU pressure: raw COPY', runs.map((x) => x.rawCopy.machine.cpuPressure), pct, false);
  line('CPU pressure: NATS only', runs.map((x) => x.natsOnly.machine.cpuPressure), pct, false);
  line('CPU pressure: ingest', runs.map((x) => x.ingest.machine.cpuPressure), pct, false);
  const widths = (rows[0] ?? []).map((_, col) => Math.max(...rows.map((row) => (row[col] ?? '').length)));
  return rows.map((row) => row.map((cell, col) => (col === 0 ? cell.padEnd(widths[col] ?? 0) : cell.padStart(widths[col] ?? 0))).join('  ')).join('\n');
}

/** Writes `bench/results/<name>-<timestamp>.json` and returns its path. */
export function writeResults(name: string, startedAt: Date, doc: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = `${RESULTS_DIR}${name}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`;
  writeFileSync(path, `${JSON.stringify(doc, null, 2)}\n`);
  return path;
}
