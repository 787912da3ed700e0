import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median, RESULTS_DIR, sourceVersion } from './ingest/report.js';
import { Cleanup } from './support/cleanup.js';
import type { BenchOptions } from './support/options.js';
import { formatProfileSummary } from './support/cpu-profile.js';
import { cpuMs } from './support/proc.js';
import { startResult } from './support/result.js';
import { serverFacts } from './support/scratch.js';
import { rawEvent } from './webhooks/load.js';
import { type Latency, latency, WARMUP_MAX_SECONDS } from './webhooks/latency.js';
import { Receiver } from './webhooks/processes.js';
import { rawPostLoop } from './webhooks/raw-loop.js';
import { type Throughput, throughput } from './webhooks/throughput.js';

/**
 * `npm run bench -- webhooks`: the dispatcher (`serve --roles dispatcher`, its own process)
 * fans events out of the log to a local keep-alive receiver (another process) answering 200 at
 * once, beside a same-run baseline: a bare undici POST loop to the same receiver.
 * - Version 1 throughput: N events already in the log, 8 tenants × 7 URLs → deliveries/s.
 * - Version 2 throughput: 3N events, grouped (≤100 per request) → events/s.
 * - Latency at half the Version 1 rate: events appended at a steady rate (8 tenants, plus a
 *   ninth taking a third of the traffic), t0 = the append's commit, t1 = arrival at the
 *   receiver, over the 8 tenants' events after a warm-up (at least WARMUP_SECONDS, and until the
 *   start-up backlog is delivered); then the same run with the ninth
 *   tenant's 7 endpoints slow (answering after 5 s): the change in the others' p99. The two
 *   take turns going first from one run to the next.
 * Beside each rate, the CPU each side spent per request: the raw loop's process and the
 * receiver's for the baseline; the dispatcher's, Postgres's and the receiver's for Version 1
 * (all of them share the machine, so on a small one their sum bounds the rate).
 * A run is void unless every event arrived (the receiver's distinct ids = events published).
 * Both sides of the throughput ratio are steady states: one untimed raw loop warms the bench
 * process and the receiver before the first run, and the Version 1 rate counts from the arrival
 * of the tenth of the deliveries (each run starts a new dispatcher process, whose code is not yet
 * optimized by the JIT); the whole window's rate is kept beside it. The default size, 100k
 * events, gives the raw loop a window of 1.5–3 s: with 20k it lasted well under a second and
 * its rate swung with whatever else the machine did (24k–67k requests/s on one day).
 */

const SLOW_MS = 5000;

export async function runWebhooksBench(opts: BenchOptions): Promise<void> {
  const count = opts.events ?? 100_000;
  const result = await startResult('webhooks');
  const profileDir = opts.profile ? `${RESULTS_DIR}profiles/webhooks-${new Date().toISOString().replace(/[:.]/g, '-')}` : null;
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  try {
    const receiver = await Receiver.start(SLOW_MS);
    cleanup.add('receiver', () => receiver.stop());
    const runs: RunResult[] = [];
    const body = JSON.stringify(rawEvent('1', 'open', 'raw'));
    await rawPostLoop(receiver.url('/raw'), body, count, 64);
    for (let run = 1; run <= opts.runs; run++) {
      const receiverCpu = cpuMs(receiver.pid);
      const raw = await rawPostLoop(receiver.url('/raw'), body, count, 64);
      const rawRate = (raw.ok * 1000) / raw.ms;
      const rawReceiverCpuUs = Math.round(((cpuMs(receiver.pid) - receiverCpu) * 1000) / count);
      progress(`run ${run}: raw loop ${Math.round(rawRate)}/s (${raw.cpuUsPerRequest.toFixed(1)} µs CPU per request in this process, receiver ${rawReceiverCpuUs} µs)`);
      const v1 = await throughput(cleanup, receiver, 1, count, profileDir !== null ? `${profileDir}/v1-run-${run}` : null);
      if (v1.profile !== null) progress(formatProfileSummary(v1.profile));
      progress(`run ${run}: Version 1 ${Math.round(v1.perSec)} deliveries/s (${Math.round(v1.wholePerSec)}/s over the whole window; dispatcher ${v1.dispatcherCpuUsPerEvent} µs CPU each, Postgres ${v1.postgresCpuUsPerEvent} µs, receiver ${v1.receiverCpuUsPerEvent} µs; ${v1.outboxRows} outbox rows; machine busy ${pct(v1.machine.busy)}, CPU pressure ${pct(v1.machine.cpuPressure)})`);
      const v2 = await throughput(cleanup, receiver, 2, count * 3);
      progress(`run ${run}: Version 2 ${Math.round(v2.perSec)} events/s in ${v2.requests} requests (dispatcher ${v2.dispatcherCpuUsPerEvent} µs CPU per event)`);
      const rate = Math.max(100, Math.round(v1.perSec / 2));
      // The two latency phases take turns going first: the first one follows Version 2's load
      // (300k events, then a database dropped), and whatever that leaves behind on the machine
      // should not always fall on the same side of the comparison.
      const slowFirst = run % 2 === 0;
      const phase = async (withSlow: boolean) => {
        const l = await latency(cleanup, receiver, rate, withSlow);
        progress(`run ${run}: at ${rate}/s${withSlow ? ', a tenant\'s endpoints slow,' : ''} p50 ${l.p50} p99 ${l.p99} max ${l.max} ms (CPU pressure ${pct(l.machine.cpuPressure)}; after a warm-up of ${warmupText(l)})`);
        return l;
      };
      const first = await phase(slowFirst);
      const second = await phase(!slowFirst);
      const [calm, slow] = slowFirst ? [second, first] : [first, second];
      const r: RunResult = { rawRate, rawCpuUsPerRequest: raw.cpuUsPerRequest, rawReceiverCpuUs, v1, v2, rate, calm, slow, latencyOrder: slowFirst ? 'slow first' : 'calm first' };
      runs.push(r);
      process.stderr.write(
        `run ${run}: raw ${Math.round(rawRate)}/s | v1 ${Math.round(v1.perSec)} deliveries/s | v2 ${Math.round(v2.perSec)} events/s | at ${rate}/s p50 ${calm.p50} p99 ${calm.p99} ms | with a slow endpoint p99 ${slow.p99} ms (CPU pressure ${pct(slow.machine.cpuPressure)})\n`,
      );
    }
    const summary = {
      benchmark: 'webhooks',
      events: count,
      runs: runs.length,
      rawPostsPerSec: Math.round(median(runs.map((r) => r.rawRate))),
      v1DeliveriesPerSec: Math.round(median(runs.map((r) => r.v1.perSec))),
      v1WholeWindowPerSec: Math.round(median(runs.map((r) => r.v1.wholePerSec))),
      v1VsRaw: Number(median(runs.map((r) => r.v1.perSec / r.rawRate)).toFixed(2)),
      rawCpuUsPerRequest: Number(median(runs.map((r) => r.rawCpuUsPerRequest)).toFixed(1)),
      v1DispatcherCpuUsPerDelivery: Math.round(median(runs.map((r) => r.v1.dispatcherCpuUsPerEvent))),
      v1PostgresCpuUsPerDelivery: Math.round(median(runs.map((r) => r.v1.postgresCpuUsPerEvent))),
      rawReceiverCpuUsPerRequest: Math.round(median(runs.map((r) => r.rawReceiverCpuUs))),
      v1ReceiverCpuUsPerDelivery: Math.round(median(runs.map((r) => r.v1.receiverCpuUsPerEvent))),
      v1OutboxRows: Math.round(median(runs.map((r) => r.v1.outboxRows))),
      v2EventsPerSec: Math.round(median(runs.map((r) => r.v2.perSec))),
      v2DispatcherCpuUsPerEvent: Math.round(median(runs.map((r) => r.v2.dispatcherCpuUsPerEvent))),
      v2Requests: Math.round(median(runs.map((r) => r.v2.requests))),
      latencyRate: Math.round(median(runs.map((r) => r.rate))),
      latencyP50Ms: median(runs.map((r) => r.calm.p50)),
      latencyP99Ms: median(runs.map((r) => r.calm.p99)),
      slowP99Ms: median(runs.map((r) => r.slow.p99)),
      slowP99Change: Number(median(runs.map((r) => r.slow.p99 / r.calm.p99 - 1)).toFixed(3)),
      source: sourceVersion(),
      server: await serverFacts(),
      perRun: runs,
    };
    print(summary);
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `webhooks-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`results: ${file}`);
    const raw = { name: 'bare undici POST loop, same receiver', perRun: runs.map((r) => r.rawRate) };
    await result.write({ events: count, runs: runs.length, latencyRate: summary.latencyRate }, [
      { name: 'Version 1: deliveries/s (8 tenants × 7 URLs)', unit: 'deliveries/s', perRun: runs.map((r) => r.v1.perSec), baseline: raw, note: `from the tenth delivery on; over the whole window ${runs.map((r) => Math.round(r.v1.wholePerSec)).join(' · ')}/s; CPU per delivery: dispatcher ${summary.v1DispatcherCpuUsPerDelivery} µs, Postgres ${summary.v1PostgresCpuUsPerDelivery} µs, receiver ${summary.v1ReceiverCpuUsPerDelivery} µs; ${summary.v1OutboxRows} outbox rows of ${count} events; CPU per request of the raw loop: its own ${summary.rawCpuUsPerRequest} µs, receiver ${summary.rawReceiverCpuUsPerRequest} µs` },
      { name: 'Version 2: events/s (grouped, ≤100 per request)', unit: 'events/s', perRun: runs.map((r) => r.v2.perSec), baseline: raw, note: `${summary.v2Requests} requests` },
      {
        name: `commit → arrival p99 at ${summary.latencyRate}/s, one tenant's endpoints slow`,
        unit: 'ms',
        better: 'lower',
        perRun: runs.map((r) => r.slow.p99),
        baseline: { name: 'same, no slow endpoint', perRun: runs.map((r) => r.calm.p99) },
        note: `p50 ${summary.latencyP50Ms} ms without the slow endpoint; phase run first: ${runs.map((r) => (r.latencyOrder === 'slow first' ? 'slow' : 'no slow endpoint')).join(' · ')}; warm-ups without the slow endpoint ${runs.map((r) => warmupText(r.calm)).join(' · ')}, with it ${runs.map((r) => warmupText(r.slow)).join(' · ')}`,
      },
    ]);
  } finally {
    offSignals();
    await cleanup.runAll();
  }
}

interface RunResult {
  rawRate: number;
  /** The raw loop's own CPU per request (µs). */
  rawCpuUsPerRequest: number;
  /** The receiver's CPU per request of the raw loop (µs). */
  rawReceiverCpuUs: number;
  v1: Throughput;
  v2: Throughput;
  rate: number;
  calm: Latency;
  slow: Latency;
  /** Which latency phase ran first in this run. */
  latencyOrder: 'calm first' | 'slow first';
}

const progress = (line: string) => process.stderr.write(`${line}\n`);
const warmupText = (l: Latency) => `${l.warmup.seconds} s (its p99 ${l.warmup.p99} ms${l.warmup.caughtUp ? '' : `, backlog not delivered by ${WARMUP_MAX_SECONDS} s`})`;
const pct = (x: number) => `${Math.round(x * 100)}%`;

function print(s: {
  rawPostsPerSec: number;
  v1DeliveriesPerSec: number;
  v1VsRaw: number;
  v2EventsPerSec: number;
  latencyRate: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  slowP99Ms: number;
  slowP99Change: number;
  runs: number;
}): void {
  console.log(`\nwebhooks (medians of ${s.runs} runs)`);
  console.table({
    'baseline: raw undici POST loop': { figure: `${s.rawPostsPerSec} requests/s`, target: '' },
    'Version 1 deliveries': { figure: `${s.v1DeliveriesPerSec}/s (${Math.round(s.v1VsRaw * 100)}% of raw)`, target: '≥ 5,000/s and ≥ 50%' },
    'Version 2 events': { figure: `${s.v2EventsPerSec}/s`, target: '≥ 25,000/s' },
    [`commit → delivered at ${s.latencyRate}/s`]: { figure: `p50 ${s.latencyP50Ms} ms, p99 ${s.latencyP99Ms} ms`, target: 'p99 ≤ 100 ms' },
    'same, with a slow endpoint': { figure: `p99 ${s.slowP99Ms} ms (${s.slowP99Change >= 0 ? '+' : ''}${Math.round(s.slowP99Change * 100)}%)`, target: '< 10% change' },
  });
}
