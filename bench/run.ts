import { parseArgs } from 'node:util';
import type { Bench, BenchOptions } from './support/options.js';

/**
 * `tsx bench/run.ts [name…] [--events N] [--runs R] [--profile]`: runs the benchmarks named, or
 * all of them and then `report` (BENCHMARKS.md from their results); `report` alone re-renders it.
 */

const BENCHES: Record<string, () => Promise<Bench>> = {
  ingest: async () => (await import('./ingest.js')).runIngestBench,
  replay: async () => (await import('./replay.js')).runReplayBench,
  freshness: async () => (await import('./freshness.js')).runFreshnessBench,
  projector: async () => (await import('./projector.js')).runProjectorBench,
  webhooks: async () => (await import('./webhooks.js')).runWebhooksBench,
  api: async () => (await import('./api.js')).runApiBench,
  peer: async () => (await import('./peer.js')).runPeerBench,
};

class UsageError extends Error {}

const USAGE = `Usage: tsx bench/run.ts [${Object.keys(BENCHES).join('|')}|report] [--events N] [--runs R] [--profile]`;

function positive(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text.replace(/_/g, ''));
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive whole number`);
  return n;
}

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: { events: { type: 'string' }, runs: { type: 'string' }, profile: { type: 'boolean', default: false } },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parse(argv);
  const names = positionals.length > 0 ? positionals : [...Object.keys(BENCHES), 'report'];
  const unknown = names.filter((n) => !(n in BENCHES) && n !== 'report');
  if (unknown.length > 0) {
    throw new UsageError(`Unknown benchmark ${unknown.join(', ')}`);
  }
  const opts: BenchOptions = { events: positive(values.events, '--events'), runs: positive(values.runs, '--runs') ?? 3, profile: values.profile };
  let failed = 0;
  for (const name of names) {
    const load = BENCHES[name];
    if (load === undefined) {
      console.log(`\nreport: ${await (await import('./report.js')).writeReport()}`);
      continue;
    }
    try {
      await (await load())(opts);
    } catch (err) {
      // One failing benchmark leaves the others (and the report, which says what is missing) to run.
      if (names.length === 1) throw err;
      console.error(`${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      failed++;
    }
  }
  return failed > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`${err.message}\n${USAGE}`);
    else console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
