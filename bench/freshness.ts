import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { Cleanup } from './support/cleanup.js';
import { formatProfileSummary, type ProfileSummary, summarizeCpuProfile } from './support/cpu-profile.js';
import type { BenchOptions } from './support/options.js';
import { anyProbeVisible, freshnessFigures } from './freshness/figures.js';
import { oneRun, WARMUP_MAX_S, WARMUP_S } from './freshness/one-run.js';
import { startResult } from './support/result.js';

/**
 * `npm run bench -- freshness`: the service (ingest + projector, one process) against real NATS
 * and Postgres; realistic traffic published at a steady 1k, 5k and 20k events/s; among it, probe
 * messages (a `sent` for a new message of a dedicated tenant, 50 a second). For each probe:
 * publish → stored in the log (its row's recorded_at) and publish → visible in the `messages`
 * read model. Same-run baseline: NATS publish → ack round trip alone.
 *
 * The publisher shares the machine with what it measures, so it does as little as it can: the
 * background traffic is generated and encoded before the clock starts and published without
 * waiting for each ack (JetStream stores it all the same, deduplicating by Nats-Msg-Id); the
 * probes are JetStream publishes with acks (the baseline). Visibility is checked when the read
 * models announce a commit (`NOTIFY mailtally_read_models`, as the API's cache hears it), and
 * every 20 ms in case a notification is missed.
 * Per run it also reports where the CPU went while publishing (the service process, the
 * database's Postgres backends, nats-server, this process: publisher and poller) and how busy
 * the machine was, other work on it included. `--profile` writes a CPU profile of the service
 * and summarizes the first run's measured window. FRESHNESS_RATES (e.g. `5000`) and
 * FRESHNESS_SECONDS narrow a run while iterating.
 * Each run first publishes at its rate for a warm-up whose probes are not counted: the figures
 * are the steady state, not the service's first seconds (code not yet optimized by the JIT, an
 * empty group cache, pools still opening) nor the backlog those seconds leave, which on a slow
 * machine can take seconds more to clear. The warm-up lasts FRESHNESS_WARMUP_SECONDS (default
 * 3) and until, for a second, every probe published more than 100 ms before is visible, at most
 * FRESHNESS_WARMUP_MAX_SECONDS (default 8; a rate the service cannot keep up with reaches it).
 * Its length and p99 are reported apart (`warm-up`), so a slow start stays visible.
 * FRESHNESS_PREFILL (default 0) puts that many events (another seed's) in the log before the
 * service starts, waits for the projector to fold them, then analyzes the database: the service
 * is measured over a log it has already worked through, with the statistics autovacuum keeps in
 * production, instead of a new database's empty log without any.
 */

const RATES = process.env['FRESHNESS_RATES'] !== undefined ? process.env['FRESHNESS_RATES'].split(',').map(Number) : [1000, 5000, 20_000];
const DURATION_S = Number(process.env['FRESHNESS_SECONDS'] ?? 15);

export async function runFreshnessBench(opts: BenchOptions): Promise<void> {
  const seconds = DURATION_S;
  const result = await startResult('freshness');
  const cleanup = new Cleanup();
  const onSignal = () => void cleanup.runAll().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const profiles: Record<string, ProfileSummary | null> = {};
  try {
    const results = [];
    for (const rate of RATES) {
      const perRun = [];
      for (let run = 1; run <= opts.runs; run++) {
        const profileDir = opts.profile && run === 1 ? join(RESULTS_DIR, 'profiles', `freshness-${stamp}`, `${rate}`) : null;
        const r = await oneRun(cleanup, rate, seconds, profileDir);
        perRun.push(r);
        if (profileDir !== null) profiles[`${rate}/s`] = summarizeProfile(profileDir, r.window);
        const cpu = r.cpu;
        process.stderr.write(
          `${rate}/s run ${run}: ${visibleText(r)} (warm-up ${r.warmup.seconds} s${r.warmup.caughtUp ? '' : ', backlog not cleared'}, its p99 ${r.warmupVisible.p99}) | stored p50 ${r.stored.p50} p99 ${r.stored.p99} | NATS ack p50 ${r.natsAck.p50} p99 ${r.natsAck.p99} | achieved ${r.achievedRate}/s` +
            ` | CPU (cores) service ${cpu.service} postgres ${cpu.postgres} nats ${cpu.nats} publisher ${cpu.publisher}, machine busy ${cpu.machineBusy} pressure ${cpu.cpuPressure}\n`,
        );
      }
      results.push({
        rate,
        visibleP50: seenMedian(perRun, (r) => r.visible.p50),
        visibleP99: seenMedian(perRun, (r) => r.visible.p99),
        storedP50: median(perRun.map((r) => r.stored.p50)),
        storedP99: median(perRun.map((r) => r.stored.p99)),
        natsAckP50: median(perRun.map((r) => r.natsAck.p50)),
        natsAckP99: median(perRun.map((r) => r.natsAck.p99)),
        warmupVisibleP99: median(perRun.map((r) => r.warmupVisible.p99)),
        achievedRate: median(perRun.map((r) => r.achievedRate)),
        serviceCores: median(perRun.map((r) => r.cpu.service)),
        postgresCores: median(perRun.map((r) => r.cpu.postgres)),
        machineBusy: median(perRun.map((r) => r.cpu.machineBusy)),
        perRun,
      });
    }
    console.log(`\nfreshness: publish → visible in the read model (ms, medians of ${opts.runs} runs of ${seconds} s after a warm-up of at least ${WARMUP_S} s)`);
    console.table(
      Object.fromEntries(
        results.map((r) => [
          `${r.rate}/s`,
          { 'visible p50': r.visibleP50, 'visible p99': r.visibleP99, 'in log p50': r.storedP50, 'in log p99': r.storedP99, 'baseline NATS ack p50': r.natsAckP50, 'baseline NATS ack p99': r.natsAckP99, 'warm-up visible p99': r.warmupVisibleP99, 'achieved/s': r.achievedRate, 'service cores': r.serviceCores, 'postgres cores': r.postgresCores, 'machine busy': r.machineBusy },
        ]),
      ),
    );
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `freshness-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify({ benchmark: 'freshness', seconds, source: sourceVersion(), results, profiles }, null, 2)}\n`);
    for (const [rate, profile] of Object.entries(profiles)) if (profile !== null) console.log(`\n${rate}: ${formatProfileSummary(profile)}`);
    console.log(`results: ${file}`);
    await result.write({ rates: RATES, seconds, warmupSeconds: WARMUP_S, warmupMaxSeconds: WARMUP_MAX_S, runs: opts.runs }, freshnessFigures(results));
  } finally {
    process.off('SIGINT', onSignal);
    await cleanup.runAll();
  }
}

type Run = Awaited<ReturnType<typeof oneRun>>;

/** A run's visibility figures; a run in which no probe became visible has none (not 0 ms). */
function visibleText(r: Run): string {
  if (!anyProbeVisible(r)) return `no probe visible before the run ended (${r.probes} published)`;
  const unseen = r.unseen > 0 ? `, ${r.unseen} of ${r.probes} probes not visible by the end: percentiles of the visible ones` : '';
  return `visible p50 ${r.visible.p50} ms p99 ${r.visible.p99} ms max ${r.visible.max}${unseen}`;
}

/** The median over the runs in which some probe became visible ('none visible' if in none). */
function seenMedian(runs: readonly Run[], pick: (r: Run) => number): number | string {
  const seen = runs.filter(anyProbeVisible);
  return seen.length > 0 ? median(seen.map(pick)) : 'none visible';
}

/** The service's main-thread profile (the largest file), cut to the publishing window. */
function summarizeProfile(dir: string, window: { fromMsBeforeEnd: number; toMsBeforeEnd: number }): ProfileSummary | null {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(dir, f));
  const main = files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return main !== undefined ? summarizeCpuProfile(main, window) : null;
}
