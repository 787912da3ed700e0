import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { RESULTS_DIR } from './ingest/report.js';
import { calibrateMachine, describeMachineCalibration } from './support/calibration.js';
import { type BenchResult, describeCalibrations, describeMachine, type Figure, machineFacts } from './support/result.js';
import { NATS_URL, serverFacts } from './support/scratch.js';

/**
 * `npm run bench -- report`: renders BENCHMARKS.md from the latest `bench/results/<bench>.json`
 * of each benchmark (written by the benchmarks themselves), with the machine and versions.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const REPORT_PATH = `${ROOT}BENCHMARKS.md`;

/** Each benchmark in report order, with its default size (what the issues ask for). */
const BENCHES: { name: string; title: string; defaults: string; isDefault: (p: Record<string, unknown>) => boolean }[] = [
  { name: 'ingest', title: 'Ingest: NATS backlog → log', defaults: '1M events', isDefault: (p) => Number(p['events']) >= 1_000_000 },
  { name: 'replay', title: 'Replay: rebuild every read model', defaults: '2M events generated', isDefault: (p) => Number(p['generated']) >= 2_000_000 },
  { name: 'freshness', title: 'Freshness: publish → visible', defaults: '1k, 5k, 20k events/s, 15 s each after a warm-up of at least 3 s', isDefault: (p) => String(p['rates']) === '1000,5000,20000' && Number(p['seconds']) >= 15 && Number(p['warmupSeconds'] ?? 0) >= 3 },
  { name: 'projector', title: 'Projector: draining the log in small batches', defaults: '100k events generated', isDefault: (p) => Number(p['generated']) >= 100_000 },
  { name: 'api', title: 'Read API', defaults: '1M events', isDefault: (p) => Number(p['events']) >= 900_000 },
  { name: 'webhooks', title: 'Webhooks', defaults: '100k events', isDefault: (p) => Number(p['events']) >= 100_000 },
  { name: 'peer', title: 'Peer comparison: emmett (PostgreSQL)', defaults: '50k events generated', isDefault: (p) => Number(p['generated']) >= 50_000 },
];

const PACKAGES = ['pg', 'kysely', 'fastify', '@nats-io/jetstream', '@nats-io/transport-node', 'undici', 'autocannon', 'tsx', 'typescript', '@event-driven-io/emmett-postgresql', '@event-driven-io/emmett'];

const PEER_DIFFERENCES = `What differs between the two sides:
- Append. mailtally writes the log as ingest does: batches of 20,000 rows, each COPYed into a
  staging table and then inserted with ON CONFLICT DO NOTHING on (tenant, EventID) (duplicates
  dropped), into a table with 26 typed columns and its indexes. emmett has no multi-stream batch append: each
  \`appendToStream\` call writes one stream (here one message, all its events at once, its best
  case) in its own transaction through a stored procedure that checks and bumps the stream's
  version; several calls run at once. emmett stores each event's columns as a JSONB document
  (the raw payload as a string inside it) and does no duplicate check (it was given the
  distinct events only).
- Rebuild. mailtally's replay of \`campaign-overview\` reads every event in position order,
  groups them by message and campaign, folds them in memory (eight distinct-message counters
  and the first message time per campaign, plus the campaigns' metadata rows) and writes
  shadow tables by COPY, indexes them and swaps them in: more output than emmett's side.
  emmett's \`rebuildPostgreSQLProjections\` pulls batches of events from its message table
  and hands them to the projection one event at a time, storing the checkpoint after each;
  its projection here keeps four distinct-message counters (sent, open, click, bounce) per
  campaign with a \`seen\` table, one upsert statement per event, less output than
  mailtally's. The ratio is mailtally ÷ emmett.
- Both rebuilds should agree on those four counts (compared every run, in the notes). They do
  when emmett's appends ran one at a time (a 10k-event trial with EMMETT_CONCURRENCY=1: no
  difference). With appends in flight together they can differ: emmett's rebuild reads events in
  (transaction_id, global_position) order but checkpoints by global_position and skips any event
  at or below its checkpoint, so an event is passed over when an event with a higher position
  came from a transaction with a lower id (concurrent appends take positions and transaction ids
  in different orders). The notes count those events, from emmett's own table.`;

function loadResult(name: string): BenchResult | null {
  const path = `${RESULTS_DIR}${name}.json`;
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as BenchResult) : null;
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(`${ROOT}node_modules/${name}/package.json`, 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

async function natsVersion(): Promise<string> {
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 3000 });
    const version = nc.info?.version ?? '?';
    await nc.close();
    return version;
  } catch {
    return 'unreachable';
  }
}

function num(x: number | null | undefined, unit: string): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  if (unit === 'ms') return x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(x < 10 ? 1 : 0)} ms`;
  return x >= 10_000 ? `${(x / 1000).toFixed(1)}k` : x.toFixed(0);
}

const sourceText = (r: BenchResult) =>
  `${r.source.commit}${r.source.uncommitted.length > 0 ? ` with uncommitted changes to ${r.source.uncommitted.map((l) => l.replace(/^\s*\S+\s+/, '')).join(', ')}` : ''}`;
const perRun = (f: Figure, xs: number[]) => xs.map((x) => num(x, f.unit)).join(' · ');
const loadText = (r: BenchResult) => `${r.load.start[0]?.toFixed(2)} → ${r.load.end[0]?.toFixed(2)} (busy ${Math.round(r.load.busy * 100)}%)`;

function figureRows(r: BenchResult): string[] {
  return r.figures.map((f) => {
    const unit = f.unit === 'ms' ? '' : ` ${f.unit}`;
    const ratio = f.ratio !== null ? f.ratio.toFixed(2) : '–';
    const baseline = f.baseline !== null ? `${f.baseline.name}: ${num(f.baseline.value, f.unit)}${unit}` : '–';
    const runs = `${perRun(f, f.perRun)}${f.baseline !== null ? ` (baseline ${perRun(f, f.baseline.perRun)})` : ''}`;
    return `| ${f.name} | ${num(f.value, f.unit)}${unit} | ${baseline} | ${ratio}${f.better === 'lower' ? ' ↓' : ''} | ${runs} | ${loadText(r)} | ${f.note ?? ''} |`;
  });
}

/** A loud line when the machine had far more runnable work than cores during the runs. */
function overloadWarning(results: readonly BenchResult[], cores: number): string[] {
  const peak = Math.max(0, ...results.flatMap((r) => [r.load.start[0] ?? 0, r.load.end[0] ?? 0]));
  if (peak <= 2 * cores) return [];
  return [
    `**The machine was overloaded during these runs** (1-minute load average up to ${peak.toFixed(1)} on ${cores} cores, other work included):`,
    'absolute figures are far below what a quiet machine gives. Compare the same-run ratios, and even those with care.',
    '',
  ];
}

export async function renderReport(): Promise<string> {
  const results = BENCHES.map((b) => ({ ...b, result: loadResult(b.name) }));
  const present = results.filter((b) => b.result !== null);
  const first = present.map((b) => b.result as BenchResult).sort((a, b) => a.startedAt.localeCompare(b.startedAt))[0];
  const server = await serverFacts().catch(() => ({}) as Record<string, string>);
  const here = machineFacts();
  const lines: string[] = [
    '# Benchmarks',
    '',
    `Generated ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`bench/report.ts\` (\`npm run bench\`, or \`npm run bench -- report\`) from the latest \`bench/results/<bench>.json\` of each benchmark.`,
    'Every figure stands beside a baseline measured in the same run on the same machine; the ratio',
    '(figure ÷ baseline, median of the per-run ratios) is the number to compare across machines and',
    'days. Values are medians of the runs listed. The machine is shared: "load" is the 1-minute load',
    'average at the start → end of that benchmark, and how busy all cores were in between, anyone\'s',
    'work included. ↓: lower is better. Other work may change the tree while benchmarks run: each',
    'benchmark records a commit (and the uncommitted files) with its result. How each benchmark works,',
    'what was measured before and what was tried: [bench/README.md](bench/README.md).',
    '',
    ...overloadWarning(present.map((b) => b.result as BenchResult), here.cores),
    '## Machine',
    '',
    `- This report was generated on: ${describeMachine(here)}; calibration now: ${describeMachineCalibration(await calibrateMachine())}. Each benchmark below names the machine it ran on (sessions may run on different ones).`,
    '- Calibration (`bench/support/calibration.ts`), timed in 5 rounds when each benchmark starts and ends: compute, a fixed piece of single-thread work (parse a raw event, write it as JSON, sign it with HMAC-SHA256, keep it in a map), and loopback, round trips of a small message over a TCP connection on 127.0.0.1 (the kernel\'s share of every query, message and request). Each gives the best round\'s operations per second, then the median round\'s. A faster machine scores higher; a median well below the best means other work was taking the CPU. The two need not move together from one machine to another. Compare absolute figures only between results with similar scores, and the same-run ratios anywhere.',
    `- Load average at the start of the first benchmark (${first?.startedAt.slice(0, 16).replace('T', ' ') ?? '–'} UTC): ${first?.load.start.join(', ') ?? '–'}; now: ${loadavg().map((x) => x.toFixed(2)).join(', ')}`,
    '',
    '## Versions',
    '',
    `- Node ${process.version}; PostgreSQL ${server['server_version'] ?? '?'} (shared_buffers ${server['shared_buffers'] ?? '?'}, synchronous_commit ${server['synchronous_commit'] ?? '?'}, fsync ${server['fsync'] ?? '?'}); nats-server ${await natsVersion()}`,
    `- Packages: ${PACKAGES.map((p) => `${p} ${packageVersion(p)}`).join(', ')}`,
    '',
    '## Figures',
    '',
  ];
  const previous = previousSections();
  for (const b of results) {
    lines.push(`### ${b.title}`, '');
    const r = b.result;
    if (r === null) {
      const carried = previous.get(b.title);
      if (carried !== undefined) {
        lines.push(`Carried over from the previous report: this machine has no \`bench/results/${b.name}.json\` (\`npm run bench -- ${b.name}\` measures it again).`, '', carried, '');
        continue;
      }
      lines.push(`Not measured: no \`bench/results/${b.name}.json\`. Run \`npm run bench -- ${b.name}\`.`, '');
      continue;
    }
    const overlapping = present.filter((o) => o.result !== r && o.result !== null && o.result.startedAt < r.finishedAt && r.startedAt < o.result.finishedAt).map((o) => o.name);
    const size = b.isDefault(r.params) ? `default size (${b.defaults})` : `**smaller than the default (${b.defaults})**`;
    lines.push(
      `${r.startedAt.slice(0, 16).replace('T', ' ')} → ${r.finishedAt.slice(11, 16)} UTC; ${Object.entries(r.params).map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join(', ')}; ${size}. mailtally at ${sourceText(r)}. Machine: ${r.machine !== undefined ? describeMachine(r.machine) : 'not recorded with this result'}${r.calibration !== undefined ? `; ${describeCalibrations(r.calibration)}` : ''}.${overlapping.length > 0 ? ` **Ran at the same time as ${overlapping.join(', ')}** (each perturbed the other).` : ''}`,
      '',
      '| figure | median | same-run baseline | ratio | per run | load | notes |',
      '|---|---|---|---|---|---|---|',
      ...figureRows(r),
      '',
    );
    for (const note of r.notes) lines.push(`- ${note}`);
    if (r.notes.length > 0) lines.push('');
    if (b.name === 'peer') lines.push(PEER_DIFFERENCES, '');
  }
  const missing = results.filter((b) => b.result === null && !previous.has(b.title)).map((b) => b.name);
  if (missing.length > 0) lines.push(`Missing from this report: ${missing.join(', ')}.`, '');
  return `${lines.join('\n')}\n`;
}

/** The figure sections of the report now on disk, by title (to carry over those not measured again). */
function previousSections(): Map<string, string> {
  const sections = new Map<string, string>();
  if (!existsSync(REPORT_PATH)) return sections;
  const text = readFileSync(REPORT_PATH, 'utf8');
  const figures = text.slice(text.indexOf('## Figures'));
  for (const part of figures.split(/^### /m).slice(1)) {
    const newline = part.indexOf('\n');
    const title = part.slice(0, newline).trim();
    let body = part.slice(newline + 1).replace(/^Missing from this report:.*$/m, '').trim();
    // A section carried over before keeps its original text only.
    body = body.replace(/^Carried over from the previous report:.*\n\n/, '');
    sections.set(title, body);
  }
  return sections;
}

export async function writeReport(): Promise<string> {
  writeFileSync(REPORT_PATH, await renderReport());
  return REPORT_PATH;
}
