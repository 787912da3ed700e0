import { readFileSync } from 'node:fs';

/** Self time by function and by library, from a V8 `.cpuprofile` (`node --cpu-prof`). */

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame }
interface CpuProfile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; endTime: number }

/** A part of the recording, in ms before its end (profiles use a monotonic clock, not wall time). */
export interface ProfileWindow {
  fromMsBeforeEnd: number;
  toMsBeforeEnd: number;
}

export interface SelfTime { name: string; ms: number; share: number }
export interface ProfileSummary {
  file: string;
  window: ProfileWindow | null;
  /** Sampled time excluding `(idle)`, in ms. */
  busyMs: number;
  idleMs: number;
  functions: SelfTime[];
  libraries: SelfTime[];
}

const LIBRARIES: readonly (readonly [RegExp, string])[] = [
  [/lossless-json/, 'lossless-json'],
  [/\/zod\//, 'zod'],
  [/ua-parser-js/, 'ua-parser-js'],
  [/\/(pg|pg-protocol|pg-types|pg-pool|postgres-\w+)\//, 'pg'],
  [/@nats-io/, 'nats'],
  [/kysely/, 'kysely'],
  [/pino|fastify|avvio/, 'pino/fastify'],
  [/\/tsx\//, 'tsx loader'],
  [/\/src\//, 'mailtally src'],
  [/^node:|^internal\//, 'node internals'],
];

function library(frame: CallFrame): string {
  if (frame.url === '') {
    if (/^\(.*\)$/.test(frame.functionName)) return frame.functionName;
    return 'V8 builtins (JSON, RegExp, …)';
  }
  for (const [re, name] of LIBRARIES) if (re.test(frame.url)) return name;
  return 'other';
}

function label(frame: CallFrame): string {
  const fn = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  if (frame.url === '') return fn;
  const file = frame.url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '').replace(/^\/work\/main\//, '');
  return `${fn} ${file}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, total: number, n: number): SelfTime[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, ms: Math.round(us / 1000), share: us / total }));
}

export function summarizeCpuProfile(file: string, window: ProfileWindow | null = null, topN = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const from = window !== null ? profile.endTime - window.fromMsBeforeEnd * 1000 : -Infinity;
  const to = window !== null ? profile.endTime - window.toMsBeforeEnd * 1000 : Infinity;
  let at = profile.endTime - profile.timeDeltas.reduce((a, b) => a + b, 0);
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byFunction = new Map<string, number>();
  const byLibrary = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    const frame = frames.get(profile.samples[i] ?? -1);
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (frame === undefined || at < from || at > to) continue;
    if (frame.functionName === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    const name = label(frame);
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const lib = library(frame);
    byLibrary.set(lib, (byLibrary.get(lib) ?? 0) + us);
  }
  return { file, window, busyMs: Math.round(busy / 1000), idleMs: Math.round(idle / 1000), functions: top(byFunction, busy, topN), libraries: top(byLibrary, busy, 20) };
}

export function formatProfileSummary(s: ProfileSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1).padStart(5)}%`;
  const part = s.window !== null ? `, ${((s.window.fromMsBeforeEnd - s.window.toMsBeforeEnd) / 1000).toFixed(1)} s window` : '';
  const lines = [`CPU profile ${s.file}${part}: busy ${s.busyMs} ms, idle ${s.idleMs} ms (self time, share of busy)`, '  by library:'];
  for (const l of s.libraries) lines.push(`    ${pct(l.share)} ${String(l.ms).padStart(7)} ms  ${l.name}`);
  lines.push('  by function:');
  for (const f of s.functions) lines.push(`    ${pct(f.share)} ${String(f.ms).padStart(7)} ms  ${f.name}`);
  return lines.join('\n');
}
