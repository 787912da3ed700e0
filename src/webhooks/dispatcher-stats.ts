import type { FanOutStats } from './fan-out.js';

/**
 * Cumulative counters of one dispatcher process, for /status and Prometheus: what was
 * delivered, what failed and why it stopped, what is in flight, and attempt latency as a
 * histogram (cumulative counts per upper bound, Prometheus style).
 */
export interface DispatcherStats {
  fanOut: FanOutStats;
  /** Deliveries (requests) answered 2xx, and the events they carried. */
  delivered: number;
  deliveredEvents: number;
  /** Attempts that failed (each retry counts). */
  failedAttempts: number;
  /** Deliveries given up after their last retry while their URL kept working for others. */
  expired: number;
  /** Deliveries dropped because their URL died with no alive backup, and their events. */
  dropped: number;
  droppedEvents: number;
  /** Deliveries moved to a backup URL when their URL died. */
  rerouted: number;
  /** URLs this process marked dead. */
  urlsDied: number;
  inFlight: { first: number; retry: number };
  /** Version 1 first attempts from the log waiting in this process for a slot of the first lane. */
  queued: number;
  /** URLs held below their concurrency cap now, after throttle answers or timeouts (url-limits.ts), per lane. */
  throttledUrls: { first: number; retry: number };
  latencyMs: LatencyHistogram;
}

export interface LatencyHistogram {
  readonly bucketsMs: readonly number[];
  /** counts[i]: attempts that took at most bucketsMs[i] (cumulative); the last is +Inf. */
  readonly counts: number[];
  sum: number;
  count: number;
}

const LATENCY_BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 15_000, 30_000] as const;

export function emptyStats(fanOut: FanOutStats): DispatcherStats {
  return {
    fanOut,
    delivered: 0,
    deliveredEvents: 0,
    failedAttempts: 0,
    expired: 0,
    dropped: 0,
    droppedEvents: 0,
    rerouted: 0,
    urlsDied: 0,
    inFlight: { first: 0, retry: 0 },
    queued: 0,
    throttledUrls: { first: 0, retry: 0 },
    latencyMs: { bucketsMs: LATENCY_BUCKETS_MS, counts: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0), sum: 0, count: 0 },
  };
}

export function observeLatency(h: LatencyHistogram, ms: number): void {
  h.sum += ms;
  h.count += 1;
  for (let i = 0; i < h.counts.length; i++) {
    const bound = h.bucketsMs[i];
    if (bound === undefined || ms <= bound) h.counts[i] = (h.counts[i] ?? 0) + 1;
  }
}
