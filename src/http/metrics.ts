import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../db/schema.js';
import { listCheckpoints } from '../log/checkpoints.js';
import { logHead } from '../log/read.js';
import { refuseOtherMethods } from './methods.js';

/**
 * GET /metrics in Prometheus format (no auth, no tenant data): request rates and latencies per
 * route, the log head (a position: inserts dropped as duplicates leave gaps, so its rate can
 * be well above the ingest rate, which the ingest outcome counters give) and each
 * reader's lag (projections, webhook dispatcher), plus whatever counters the running roles
 * publish (ingest outcomes, webhook outcomes) through `sources`.
 */

/** Cumulative counters a role keeps in memory, read at scrape time. */
export interface MetricSource {
  readonly name: string;
  readonly help: string;
  /** label value → count; the label is named `outcome`. */
  read(): Readonly<Record<string, number>>;
}

/** A gauge read at each scrape (no labels). */
export interface MetricGauge {
  readonly name: string;
  readonly help: string;
  read(): number;
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
  const lag = new Gauge({ name: 'mailtally_reader_lag_events', help: 'Events between the log head and each reader (projection, dispatcher)', labelNames: ['reader'] as const, registers: [registry] });
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

  for (const gauge of deps.gauges ?? []) {
    new Gauge({
      name: gauge.name,
      help: gauge.help,
      registers: [registry],
      collect() {
        this.set(gauge.read());
      },
    });
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
      const [h, checkpoints] = await Promise.race([Promise.all([logHead(deps.db), listCheckpoints(deps.db)]), away]);
      head.set(Number(h));
      lag.reset();
      for (const c of checkpoints) lag.set({ reader: c.name }, Number(h - c.position));
      up.set(1);
    } catch {
      // No lag shown rather than the last one known: it would look current.
      lag.reset();
      up.set(0);
    } finally {
      clearTimeout(timer);
    }
    return reply.type(registry.contentType).send(await registry.metrics());
  });
  return registry;
}
