import { createHmac } from 'node:crypto';
import net from 'node:net';
import { median } from '../ingest/report.js';

/**
 * How fast this machine is at two fixed pieces of work, measured when a benchmark starts and
 * when it ends, so that figures recorded on different machines (or on one shared machine at a
 * busier hour) can be set side by side:
 * - compute: the kind of work the hot paths do in Node: parse a raw event, build an object
 *   from it, write it back as JSON, sign it with HMAC-SHA256, and keep it in a map under a
 *   string key (an operation is one event taken through all of that);
 * - loopback: small messages sent back and forth over a TCP connection on 127.0.0.1 (an
 *   operation is one round trip), the kernel's share of every Postgres query, NATS message and
 *   webhook request. Machines differ here apart from compute: on two of the 2-core machines the
 *   benchmarks have run on, the webhooks benchmark's bare HTTP loop (almost all system calls)
 *   cost 21 and 51–71 µs of CPU per request, while the dispatcher, more of whose work is
 *   compute, cost 78 and 126–155 µs per delivery.
 *
 * Rounds are timed one by one. The best round is the machine's speed when it lets this process
 * run (least disturbed by other work); the median shows what other work left of it.
 */

export interface MachineCalibration {
  compute: Calibration;
  loopback: Calibration;
}

export interface Calibration {
  /** Operations per second in the fastest round. */
  bestOpsPerSec: number;
  /** Operations per second, median round. */
  medianOpsPerSec: number;
  rounds: number;
  opsPerRound: number;
}

const KEY = Buffer.from('mailtally-calibration-key-000000');

/** A raw event as producers send it (the shape ingest parses thousands of times a second). */
function eventText(i: number): string {
  return JSON.stringify({
    event: 'open',
    time: 1_733_000_000 + i,
    MessageID: 19_421_777_396_190_490 + i,
    Message_GUID: `1ab23cd-e45f-6789-1234-${String(i).padStart(12, '0')}`,
    email: `user${i % 997}@example.com`,
    mj_campaign_id: 7_173 + (i % 13),
    mj_contact_id: 320 + i,
    customcampaign: 'spring-sale',
    CustomID: 'helloworld',
    Payload: '',
    ip: '127.0.0.1',
    geo: 'US',
    agent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
  });
}

/** One round: `ops` events through the work; returns a checksum so the work cannot be optimized away. */
function round(texts: readonly string[], ops: number): number {
  const seen = new Map<string, number>();
  let check = 0;
  for (let i = 0; i < ops; i++) {
    const e = JSON.parse(texts[i % texts.length] as string) as Record<string, unknown>;
    const out = { event: e['event'], time: e['time'], MessageID: e['MessageID'], email: e['email'], geo: e['geo'], agent: e['agent'], CustomID: e['CustomID'] };
    const body = JSON.stringify(out);
    const mac = createHmac('sha256', KEY).update(body).digest('base64');
    seen.set(`${String(e['email'])}|${String(e['mj_campaign_id'])}`, mac.length);
    check += body.length + mac.charCodeAt(0);
  }
  return check + seen.size;
}

export function calibrate(rounds = 5, opsPerRound = 20_000): Calibration {
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`calibrate: rounds must be a positive integer, not ${rounds}`);
  if (!Number.isInteger(opsPerRound) || opsPerRound < 1) throw new Error(`calibrate: opsPerRound must be a positive integer, not ${opsPerRound}`);
  const texts = Array.from({ length: 256 }, (_, i) => eventText(i));
  let sink = round(texts, Math.min(opsPerRound, 5_000)); // warm-up: let the JIT compile the loop
  const rates: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    sink += round(texts, opsPerRound);
    const ms = Math.max(performance.now() - started, 1e-3);
    rates.push((opsPerRound * 1000) / ms);
  }
  if (!Number.isFinite(sink)) throw new Error('calibrate: the work produced no result');
  return summarize(rates, opsPerRound);
}

function summarize(rates: readonly number[], opsPerRound: number): Calibration {
  return { bestOpsPerSec: Math.round(Math.max(...rates)), medianOpsPerSec: Math.round(median(rates)), rounds: rates.length, opsPerRound };
}

/**
 * Round trips of a 64-byte message over one loopback TCP connection, both ends in this process
 * (each round trip: a write and a read on either side, and the event loop's wait in between).
 */
export async function calibrateLoopback(rounds = 5, opsPerRound = 2_000): Promise<Calibration> {
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`calibrateLoopback: rounds must be a positive integer, not ${rounds}`);
  if (!Number.isInteger(opsPerRound) || opsPerRound < 1) throw new Error(`calibrateLoopback: opsPerRound must be a positive integer, not ${opsPerRound}`);
  const message = Buffer.alloc(64, 0x61);
  const accepted = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    accepted.add(socket);
    socket.setNoDelay(true);
    socket.on('data', (chunk) => socket.write(chunk));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  const client = net.connect(port, '127.0.0.1');
  client.setNoDelay(true);
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    let received = 0;
    let wanted = 0;
    let done: () => void = () => {};
    client.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received >= wanted) done();
      else if (received % message.length === 0) client.write(message);
    });
    const roundTrips = (n: number) =>
      new Promise<void>((resolve) => {
        received = 0;
        wanted = n * message.length;
        done = resolve;
        client.write(message);
      });
    await roundTrips(Math.min(opsPerRound, 500)); // warm-up
    const rates: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const started = performance.now();
      await roundTrips(opsPerRound);
      rates.push((opsPerRound * 1000) / Math.max(performance.now() - started, 1e-3));
    }
    return summarize(rates, opsPerRound);
  } finally {
    const sockets = [client, ...accepted];
    const closed = sockets.map((socket) => (socket.closed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', () => resolve()))));
    for (const socket of sockets) socket.destroy();
    await Promise.all([...closed, new Promise<void>((resolve) => server.close(() => resolve()))]);
  }
}

/** Both calibrations, one after the other. */
export async function calibrateMachine(): Promise<MachineCalibration> {
  return { compute: calibrate(), loopback: await calibrateLoopback() };
}

/** "38.1k ops/s (median round 35.0k)" */
export function describeCalibration(c: Calibration): string {
  return `${kilo(c.bestOpsPerSec)} ops/s (median round ${kilo(c.medianOpsPerSec)})`;
}

/** "compute 158.1k ops/s (median round 154.6k), loopback 21.0k round trips/s (median round 20.1k)" */
export function describeMachineCalibration(c: MachineCalibration): string {
  return `compute ${describeCalibration(c.compute)}, loopback ${kilo(c.loopback.bestOpsPerSec)} round trips/s (median round ${kilo(c.loopback.medianOpsPerSec)})`;
}

const kilo = (x: number): string => (x >= 1000 ? `${(x / 1000).toFixed(1)}k` : String(x));
