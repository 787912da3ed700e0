import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, type MetricType, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../db/schema.js';
import { listCheckpoints } from '../log/checkpoints.js';
import { logHead } from '../log/read.js';
import { EXACT_OUTBOX_COUNT, type OutboxBacklog } from '../webhooks/outbox-backlog.js';
import { refuseOtherMethods } from './methods.js';

/**
 * GET /metrics in Prometheus format (no auth, no tenant data): request rates and latencies per
 * route, the log head (a position: inserts dropped as duplicates leave gaps, so its rate can
 * be well above the ingest rate, which the ingest outcome counters give) and each
 * reader's lag (projections, webhook dispatcher), plus whatever the running roles publish:
 * counters (ingest outcomes, webhook outcomes) through `sources`, gauges (NATS consumer, the
 * dispatcher's requests in flight) through `gauges`, histograms (webhook attempt latency)
 * through `histograms`, and the webhook outbox, read from the database with the lag.
 */

/** Cumulative counters a role keeps in memory, read at scrape time. */
export interface MetricSource {
  readonly name: string;
  readonly help: string;
  /** label value → count; the label is named `outcome`. */
  read(): Readonly<Record<string, number>>;
}

/** A gauge read at each scrape: one value, or (with `label`) one per label value; null shows none. */
export interface MetricGauge {
  readonly name: string;
  readonly help: string;
  readonly label?: string;
  read(): number | Readonly<Record<string, number>> | null;
}

/** A histogram a role keeps in milliseconds as cumulative counts per upper bound; shown in seconds. */
export interface MetricHistogram {
  readonly name: string;
  readonly help: string;
  read(): { readonly bucketsMs: readonly number[]; readonly counts: readonly number[]; readonly sum: number; readonly count: number };
}

/** What a connection pool tells of itself (pg.Pool's counts). */
export interface PoolCounts {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

export interface MetricsDeps {
  readonly db: Kysely<Database>;
  readonly sources?: readonly MetricSource[];
  readonly gauges?: readonly MetricGauge[];
  readonly histograms?: readonly MetricHistogram[];
  /** The webhook outbox's backlog (a process running the dispatcher), read with the lag. */
  readonly outbox?: (db: Kysely<Database>) => Promise<OutboxBacklog>;
  /** The process's Postgres pools by name (`main`, and `requests` with the api role). */
  readonly pools?: Readonly<Record<string, PoolCounts>>;
}

/** How long a scrape waits for the database's head and checkpoints. */
const DATABASE_WAIT_MS = 2000;

export function registerMetrics(app: FastifyInstance, deps: MetricsDeps): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'mailtally_' });

  const requests = new Counter({ name: 'mailtally_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['method', 'route', 'status'] as const, registers: [registry] });
  const latency = new Histogram({
    name: 'mailtally_http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  app.addHook('onResponse', async (req, reply) => {
    // The route template, never the raw URL: ids must not become label values.
    const route = req.routeOptions.url ?? 'unmatched';
    requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    latency.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });

  const head = new Gauge({ name: 'mailtally_log_head_position', help: 'Highest committed log position; positions have gaps (an insert dropped as a duplicate uses one up), so its rate is not the ingest rate: see mailtally_ingest_messages_total{outcome="stored"} (NATS) and mailtally_http_ingest_events_total{outcome="stored"} (POST /v1/events)', registers: [registry] });
  const lag = new Gauge({ name: 'mailtally_reader_lag_events', help: 'Log positions between the log head and each reader (projection, dispatcher): at most the events it has yet to read, as positions have gaps', labelNames: ['reader'] as const, registers: [registry] });
  const up = new Gauge({ name: 'mailtally_database_up', help: '1 when the database answered the last scrape', registers: [registry] });

  const pools = deps.pools ?? {};
  if (Object.keys(pools).length > 0) {
    new Gauge({
      name: 'mailtally_db_pool_connections',
      help: 'Postgres connections of each pool of this process: open (total), idle, and checkouts waiting for one (waiting)',
      labelNames: ['pool', 'state'] as const,
      registers: [registry],
      collect() {
        for (const [pool, p] of Object.entries(pools)) {
          this.set({ pool, state: 'total' }, p.totalCount);
          this.set({ pool, state: 'idle' }, p.idleCount);
          this.set({ pool, state: 'waiting' }, p.waitingCount);
        }
      },
    });
  }

  for (const gauge of deps.gauges ?? []) registry.registerMetric(new ReadGauge(gauge));
  for (const histogram of deps.histograms ?? []) registry.registerMetric(new KeptHistogram(histogram));
  /** The outbox as the last scrape read it; null while the database is away. */
  let backlog: OutboxBacklog | null = null;
  if (deps.outbox !== undefined) {
    for (const gauge of outboxGauges(() => backlog)) registry.registerMetric(new ReadGauge(gauge));
  }

  for (const source of deps.sources ?? []) {
    new Counter({
      name: source.name,
      help: source.help,
      labelNames: ['outcome'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [outcome, value] of Object.entries(source.read())) this.inc({ outcome }, value);
      },
    });
  }

  refuseOtherMethods(app, '/metrics', ['GET']);
  app.get('/metrics', async (_req, reply) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      // A database that does not answer must not make the scrape time out (Prometheus's default
      // is 10 s, as long as a pool checkout waits): `mailtally_database_up` 0 says it instead.
      const away = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), DATABASE_WAIT_MS);
      });
      const [h, checkpoints, outbox] = await Promise.race([Promise.all([logHead(deps.db), listCheckpoints(deps.db), deps.outbox?.(deps.db)]), away]);
      head.set(Number(h));
      lag.reset();
      for (const c of checkpoints) lag.set({ reader: c.name }, Number(h - c.position));
      backlog = outbox ?? null;
      up.set(1);
    } catch {
      // No lag or backlog shown rather than the last one known: it would look current.
      lag.reset();
      backlog = null;
      up.set(0);
    } finally {
      clearTimeout(timer);
    }
    return reply.type(registry.contentType).send(await registry.metrics());
  });
  return registry;
}

/** The outbox's gauges, read from the scrape's reading of it (none while there is none). */
function outboxGauges(reading: () => OutboxBacklog | null): MetricGauge[] {
  const of = <T>(pick: (b: OutboxBacklog) => T): (() => T | null) => () => {
    const b = reading();
    return b === null ? null : pick(b);
  };
  return [
    {
      name: 'mailtally_webhook_outbox_deliveries',
      help: `Webhook deliveries waiting in the outbox (retries waiting for their time, Version 2 batches in their window, first attempts a full lane spilled), every tenant; exact up to ${EXACT_OUTBOX_COUNT}, past it Postgres's estimate`,
      read: of((b) => b.deliveries),
    },
    { name: 'mailtally_webhook_outbox_oldest_seconds', help: 'How long the oldest delivery in the outbox has waited there (0 when none waits); a Version 1 first attempt enters the outbox when it fails', read: of((b) => b.oldestSeconds) },
    { name: 'mailtally_webhook_urls', help: 'Callback URLs by status (alive, dead), every tenant', label: 'status', read: of((b) => b.urls) },
  ];
}

type Exported = Awaited<ReturnType<Gauge['get']>>;
type ExportedValue = Exported['values'][number];
type ExportedHistogram = Awaited<ReturnType<Histogram['get']>>;

/** A gauge whose values are read at each scrape; a reading of null shows no value at all (prom-client's own shows 0 for a gauge without labels). */
class ReadGauge extends Gauge {
  readonly #source: MetricGauge;

  constructor(source: MetricGauge) {
    super({ name: source.name, help: source.help, labelNames: source.label !== undefined ? [source.label] : [], registers: [] });
    this.#source = source;
  }

  override async get(): Promise<Exported> {
    const { name, help, label } = this.#source;
    const value = this.#source.read();
    const values: ExportedValue[] =
      value === null ? [] : typeof value === 'number' ? [{ value, labels: {} }] : Object.entries(value).map(([v, n]) => ({ value: n, labels: { [label ?? 'kind']: v } }));
    return { name, help, type: 'gauge' as unknown as MetricType, aggregator: 'sum', collect: () => {}, values };
  }
}

/**
 * A histogram whose counts a role keeps itself (cumulative per upper bound, in milliseconds),
 * shown as Prometheus's `_bucket`, `_sum` and `_count` in seconds. prom-client's registry reads
 * a histogram through `getForPromString` (`get` is its JSON form): both give the kept counts.
 */
class KeptHistogram extends Histogram {
  readonly #source: MetricHistogram;

  constructor(source: MetricHistogram) {
    super({ name: source.name, help: source.help, registers: [], buckets: source.read().bucketsMs.map((ms) => ms / 1000) });
    this.#source = source;
  }

  override async get(): Promise<ExportedHistogram> {
    const { name, help } = this.#source;
    const h = this.#source.read();
    const values: ExportedHistogram['values'] = h.counts.map((value, i) => {
      const bound = h.bucketsMs[i];
      return { metricName: `${name}_bucket`, labels: { le: bound === undefined ? '+Inf' : bound / 1000 }, value };
    });
    values.push({ metricName: `${name}_sum`, labels: {}, value: h.sum / 1000 }, { metricName: `${name}_count`, labels: {}, value: h.count });
    return { name, help, type: 'histogram' as unknown as MetricType, aggregator: 'sum', collect: () => {}, values };
  }

  getForPromString(): Promise<ExportedHistogram> {
    return this.get();
  }
}
