import { mkdirSync } from 'node:fs';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import hdr from 'hdr-histogram-js';
import pg from 'pg';
import { connectDb } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { loadLog } from '../replay/load-log.js';
import type { Cleanup } from '../support/cleanup.js';
import { DEFAULT_TENANTS } from '../support/generate.js';
import { createBenchStream, createScratchDatabase, NATS_URL } from '../support/scratch.js';
import { cpuSnapshot, cpuUsed } from './cpu.js';
import { foldedAndAnalyzed, startService, stopProcess, waitForProjector } from './service.js';
import { type Pregenerated, pregenerate, track } from './traffic.js';

/** One run of the freshness benchmark at one rate: a warm-up, then the measured window (see freshness.ts). */


const PROBES_PER_SEC = 50;
export const WARMUP_S = Number(process.env['FRESHNESS_WARMUP_SECONDS'] ?? 3);
/** The warm-up also lasts until the oldest probe not yet visible is younger than this… */
const CAUGHT_UP_MS = 100;
/** …at every look (four a second) for this long… */
const KEEPING_UP_MS = 1000;
/** …but no longer than this: the window then starts anyway, and the run says so. */
export const WARMUP_MAX_S = Math.max(WARMUP_S, Number(process.env['FRESHNESS_WARMUP_MAX_SECONDS'] ?? 8));
const PREFILL = Number(process.env['FRESHNESS_PREFILL'] ?? 0);

interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

export async function oneRun(cleanup: Cleanup, rate: number, seconds: number, profileDir: string | null) {
  const scratch = await createScratchDatabase('mt_bench_fresh');
  const dropDb = cleanup.add('scratch database', () => scratch.drop());
  const db = await connectDb({ kind: 'postgres', url: scratch.url, poolSize: 2 });
  await migrateToLatest(db.kysely);
  for (let i = 0; i <= DEFAULT_TENANTS.length; i++) await createApiKey(db.kysely);
  const probeTenant = String(DEFAULT_TENANTS.length + 1);
  // Another seed than the published traffic's: other event ids, so none is dropped as a duplicate.
  if (PREFILL > 0) await loadLog(db, PREFILL, () => {}, { seed: 7, duplicateRate: 0 });
  await db.close();

  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const stream = await createBenchStream(jsm);
  const dropStream = cleanup.add('stream', () => stream.delete());
  if (profileDir !== null) mkdirSync(profileDir, { recursive: true });
  const child = startService(scratch.url, stream.stream, stream.subjectPrefix, profileDir);
  const stopChild = cleanup.add('service', () => stopProcess(child));

  const poll = new pg.Client({ connectionString: scratch.url });
  await poll.connect();
  let pollOpen = true;
  try {
    await waitForProjector(poll);
    if (PREFILL > 0) await foldedAndAnalyzed(poll);
    const js = jetstream(nc);
    const background = pregenerate(rate * (WARMUP_MAX_S + seconds + 5), stream.subjectPrefix);
    let nextBackground = 0;
    const publishedAt = new Map<string, number>();
    const probePublishTimes = new Map<number, number>();
    const visible = hdr.build();
    const warmupVisible = hdr.build();
    const stored = hdr.build();
    const natsAck = hdr.build();
    let probeSeq = 0;
    let published = 0;
    const started = performance.now();
    // Probes published before `measured` (set when the warm-up ends) are the warm-up's: counted apart.
    let measured = Number.POSITIVE_INFINITY;
    let end = Number.POSITIVE_INFINITY;
    let caughtUp = false;
    let keepingUpSince: number | null = null;
    // Looks start a second early, so a service that keeps up ends its warm-up at WARMUP_S.
    let nextCheck = started + Math.max(0, WARMUP_S * 1000 - KEEPING_UP_MS);
    let publishedBefore = 0;
    const inflight = new Set<Promise<unknown>>();
    let nextProbeAt = started;
    let pending: string[] = [];
    let cpuBefore: Awaited<ReturnType<typeof cpuSnapshot>> | null = null;

    // Visibility: checked on each read-model commit notification, and every 20 ms regardless.
    let changed: () => void = () => {};
    await poll.query('LISTEN mailtally_read_models');
    poll.on('notification', () => changed());
    const poller = (async () => {
      while (performance.now() < end + 10_000 && (performance.now() < end || publishedAt.size > 0)) {
        const wake = new Promise<void>((r) => {
          changed = r;
          setTimeout(r, 20);
        });
        if (pending.length > 0) {
          const { rows } = await poll.query<{ m: string }>({ name: 'probe', text: 'SELECT message_id::text AS m FROM messages WHERE api_key_id = $1 AND message_id = ANY($2::numeric[])', values: [probeTenant, pending] });
          const now = performance.now();
          const seen = new Set(rows.map((r) => r.m));
          for (const m of seen) {
            const t = publishedAt.get(m);
            if (t !== undefined) (t < measured ? warmupVisible : visible).recordValue(Math.max(1, Math.round(now - t)));
            publishedAt.delete(m);
          }
          pending = pending.filter((m) => !seen.has(m));
        }
        await wake;
      }
    })();

    while (performance.now() < end) {
      const tickStart = performance.now();
      if (measured === Number.POSITIVE_INFINITY && tickStart >= nextCheck) {
        // The oldest probe still waiting to be seen (the map keeps publishing order).
        // Probes turn visible a batch at a time, so one look right after a commit can find
        // nothing old pending even while the service is still behind: it must hold for a second.
        const oldest = publishedAt.values().next();
        const behindMs = oldest.done === true ? 0 : tickStart - oldest.value;
        if (behindMs > CAUGHT_UP_MS) keepingUpSince = null;
        else keepingUpSince ??= tickStart;
        caughtUp = keepingUpSince !== null && tickStart - keepingUpSince >= KEEPING_UP_MS;
        if ((caughtUp && tickStart - started >= WARMUP_S * 1000) || tickStart - started >= WARMUP_MAX_S * 1000) {
          measured = tickStart;
          end = measured + seconds * 1000;
        } else {
          nextCheck = tickStart + 250;
        }
      }
      if (cpuBefore === null && tickStart >= measured) {
        cpuBefore = await cpuSnapshot(child.pid ?? 0, poll);
        publishedBefore = published;
      }
      const due = Math.floor(((tickStart - started) / 1000) * rate) - published;
      for (let i = 0; i < due && nextBackground < background.length; i++) {
        const g = background[nextBackground++] as Pregenerated;
        nc.publish(g.subject, g.data, { headers: g.headers });
        published += 1;
      }
      while (performance.now() >= nextProbeAt && nextProbeAt < end) {
        nextProbeAt += 1000 / PROBES_PER_SEC;
        const messageId = String(9_000_000_000_000_000_000n + BigInt(++probeSeq));
        const body = JSON.stringify({ event: 'sent', time: Math.floor(Date.now() / 1000), MessageID: messageId, email: `probe${probeSeq}@example.com`, mj_campaign_id: 1 });
        const t0 = performance.now();
        publishedAt.set(messageId, t0);
        probePublishTimes.set(probeSeq, t0);
        pending.push(messageId);
        const p = js.publish(`${stream.subjectPrefix}.${probeTenant}.sent`, body, { msgID: `probe-${probeSeq}` }).then(() => {
          if (t0 >= measured) natsAck.recordValue(Math.max(1, Math.round(performance.now() - t0)));
        });
        track(inflight, p);
      }
      if (inflight.size > 20_000) await Promise.race(inflight);
      await new Promise((r) => setTimeout(r, 1));
    }
    const publishedFor = performance.now() - measured;
    const achievedRate = Math.round((published - publishedBefore) / (publishedFor / 1000));
    if (cpuBefore === null) throw new Error('the warm-up never ended');
    const cpu = cpuUsed(cpuBefore, await cpuSnapshot(child.pid ?? 0, poll), publishedFor);
    const publishingEndedAt = performance.now();
    await Promise.all(inflight);
    await poller;
    // publish → row stored: the probe rows' transaction time against their publish time.
    const { rows } = await poll.query<{ m: string; at: string }>(
      "SELECT message_id::text AS m, (extract(epoch FROM recorded_at) * 1000)::text AS at FROM events WHERE api_key_id = $1 AND type = 'sent'",
      [probeTenant],
    );
    const offset = Date.now() - performance.now();
    for (const r of rows) {
      const seq = BigInt(r.m) - 9_000_000_000_000_000_000n;
      const t = probePublishTimes.get(Number(seq));
      if (t !== undefined && t >= measured) stored.recordValue(Math.max(1, Math.round(Number(r.at) - (t + offset))));
    }
    await poll.end();
    pollOpen = false;
    await stopChild();
    // The profile ends when the service exits: the publishing window, in ms before that.
    const exitedAt = performance.now();
    const window = { fromMsBeforeEnd: exitedAt - measured, toMsBeforeEnd: exitedAt - publishingEndedAt };
    const unseen = [...publishedAt.values()].filter((t) => t >= measured).length;
    const warmup = { seconds: Math.round((measured - started) / 100) / 10, caughtUp };
    return { rate, achievedRate, probes: visible.totalCount + unseen, unseen, visible: pct(visible), warmupVisible: pct(warmupVisible), warmup, stored: pct(stored), natsAck: pct(natsAck), cpu, window };
  } finally {
    if (pollOpen) await poll.end();
    await stopChild();
    await dropStream();
    await nc.drain();
    await dropDb();
  }
}

function pct(h: hdr.Histogram): Percentiles {
  return { p50: h.getValueAtPercentile(50), p99: h.getValueAtPercentile(99), max: h.maxValue };
}
