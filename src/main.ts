import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { type Db, connectDb, connectRequestPool } from './db/connect.js';
import { startEmbeddedMaintenance } from './db/embedded-maintenance.js';
import { logLockWait, migrateToLatest } from './db/migrate.js';
import { withSchemaLock } from './db/schema-lock.js';
import type { RunningIngest } from './ingest/run-nats-ingest.js';
import { AuthFailureLimiter, RateLimiter } from './api/conventions/rate-limit.js';
import { type MetricGauge, type MetricHistogram, type MetricSource, type MetricsDeps, type PoolCounts, registerMetrics } from './http/metrics.js';
import { assertCanListen, closeServer, createServer, listenError } from './http/server.js';
import { registerStatusRoute } from './http/status-route.js';
import { KEYS_CHANNEL, KeyVerifier, countApiKeys, createApiKey, printableKey } from './keys/key-store.js';
import type { Logger } from './logger.js';
import { PROJECTIONS } from '../projections/index.js';
import type { Projector } from './projector/runner.js';
import { ensureProjectionTables } from './projector/tables.js';
import type { Dispatcher } from './webhooks/dispatcher.js';

/**
 * Composition root: config → db → nats → the roles asked for. Each role's code is loaded only
 * when the role runs: a dispatcher process carries neither the API's routes nor the NATS
 * client, an ingest process no HTTP client.
 */

export const ALL_ROLES = ['api', 'ingest', 'projector', 'dispatcher'] as const;
export type Role = (typeof ALL_ROLES)[number];

export interface Service {
  readonly db: Db;
  readonly http: FastifyInstance | null;
  readonly natsIngest: RunningIngest | null;
  readonly projector: Projector | null;
  readonly dispatcher: Dispatcher | null;
  /** The address the HTTP server listens on, e.g. http://127.0.0.1:3000. */
  readonly url: string | null;
  stop(): Promise<void>;
}

export function parseRoles(text: string): Role[] {
  const roles = [...new Set(text.split(',').map((r) => r.trim()).filter((r) => r.length > 0))];
  if (roles.length === 0) throw new Error(`--roles needs at least one of ${ALL_ROLES.join(', ')}`);
  for (const r of roles) {
    if (!(ALL_ROLES as readonly string[]).includes(r)) throw new Error(`Unknown role "${r}"; roles are ${ALL_ROLES.join(', ')}`);
  }
  return roles as Role[];
}

/**
 * Starts the roles asked for. `signal` (a SIGTERM during start) stops the start between steps,
 * and a wait for the schema lock within it: what has started is stopped again and the abort's
 * reason is thrown. A read-model rebuild does not hold the start: it runs in the background
 * (`stop` ends it).
 */
export async function startService(config: Config, roles: readonly Role[], log: Logger, signal?: AbortSignal): Promise<Service> {
  // The HTTP settings first (the TLS rule, the certificate read, the port free): a bad one is
  // reported at once, not after the migrations and the leases.
  const http = createServer(config.http, log);
  await assertCanListen(config.http);
  const db = await connectDb(config.database, { application: `mailtally:${roles.join('+')}` });
  const cleanup: (() => Promise<void>)[] = [() => db.close()];
  let stopIntake = async (): Promise<void> => {};
  const checkpoint = () => signal?.throwIfAborted();
  try {
    checkpoint();
    const stale = await withSchemaLock(db, async () => {
      await migrateToLatest(db.kysely, { onLockWait: logLockWait(log), ...(signal !== undefined ? { signal } : {}) });
      return ensureProjectionTables(db.kysely, PROJECTIONS);
    }, signal);
    checkpoint();
    if (db.kind === 'pglite') {
      await ensureFirstKey(db, log);
      // Vacuum and checkpoint: no background process of the embedded database does it.
      cleanup.unshift(startEmbeddedMaintenance(db, log));
      warnRolesLeftOut(roles, log);
    }

    let natsIngest: RunningIngest | null = null;
    if (roles.includes('ingest') && config.nats !== null) {
      natsIngest = await startNatsIngest(config, db, log.child({ role: 'ingest' }));
      const ingest = natsIngest;
      let ingestStopped: Promise<void> | null = null;
      stopIntake = () => (ingestStopped ??= ingest.stop());
      cleanup.unshift(stopIntake);
      checkpoint();
    }

    // The projector and the dispatcher start once the server listens: on the embedded database
    // (one session) the rest of the start would otherwise wait behind a backlog's batches, and
    // /healthz with it (34 s after a 150k-event import). Each `start` adds its stop to `stops`.
    const starts: ((stops: (() => Promise<void>)[]) => Promise<void>)[] = [];
    let projector: Projector | null = null;
    if (roles.includes('projector')) {
      const plog = log.child({ role: 'projector' });
      const { Projector } = await import('./projector/runner.js');
      // Read models built by another version of their code are held back while they are rebuilt
      // in the background: the others are applied, and the API serves their old tables meanwhile.
      const running = new Projector(db, PROJECTIONS, { ...config.projector, holdBack: stale.map((p) => p.name) }, plog);
      projector = running;
      starts.push(async (stops) => {
        await running.start();
        stops.unshift(() => running.stop());
        if (stale.length > 0) {
          const { startStaleRebuild } = await import('./projector/rebuild-in-background.js');
          // Stopped (aborted; a statement still running after a moment has its connection ended)
          // before the projector that would take its projections up, and before the database closes.
          stops.unshift(startStaleRebuild(db, stale, config, running, plog));
        }
      });
    }

    let dispatcher: Dispatcher | null = null;
    if (roles.includes('dispatcher')) {
      const { Dispatcher } = await import('./webhooks/dispatcher.js');
      const running = new Dispatcher(db, config.webhooks, log.child({ role: 'dispatcher' }));
      dispatcher = running;
      starts.push(async (stops) => {
        await running.start();
        stops.unshift(() => running.stop());
      });
    }

    // The API's requests have a pool of their own, with a statement timeout (connect.ts), and so
    // does their key check; on the embedded database, one connection in the process, they share
    // it and have none. The pool goes last, just before the database: statements still running
    // once the HTTP server has closed are cancelled then, so they hold up no worker's drain.
    let requestDb = db.kysely;
    const pools: Record<string, PoolCounts> = db.pool !== null ? { main: db.pool } : {};
    if (roles.includes('api') && config.database.kind === 'postgres') {
      const requests = await connectRequestPool(config.database, { application: `mailtally:${roles.join('+')}:requests`, statementTimeoutMs: config.api.statementTimeoutMs });
      cleanup.splice(cleanup.length - 1, 0, () => requests.close(db.kysely));
      requestDb = requests.kysely;
      pools['requests'] = requests.pool;
      checkpoint();
    }
    const verifier = new KeyVerifier(requestDb);
    // Every process serves /healthz, /status and /metrics (a worker-only one too, for probes and
    // scraping); the api and ingest roles add their routes.
    if (roles.includes('api') || roles.includes('ingest')) {
      // A key revoked (`keys revoke`) stops authenticating here at once, not when its cached check expires.
      const unlistenKeys = await db.listen(KEYS_CHANNEL, () => verifier.forget());
      cleanup.unshift(unlistenKeys);
    }
    // One count of failed Basic-auth attempts per address, for every route that takes Basic auth.
    const authFailures = new AuthFailureLimiter(config.api.authFailuresPerMinute, 60_000);
    const ingest = natsIngest;
    const running = projector;
    const webhooks = dispatcher;
    const sources: MetricSource[] = [];
    if (webhooks !== null) {
      sources.push({
        name: 'mailtally_webhook_deliveries_total',
        help: 'Webhook work in this process: requests delivered (2xx), failed attempts, deliveries expired, dropped or rerouted, URLs turned dead',
        read: () => {
          const s = webhooks.stats;
          return { delivered: s.delivered, delivered_events: s.deliveredEvents, failed_attempts: s.failedAttempts, expired: s.expired, dropped: s.dropped, rerouted: s.rerouted, urls_died: s.urlsDied };
        },
      });
    }
    if (ingest !== null) {
      sources.push({ name: 'mailtally_ingest_messages_total', help: 'NATS messages taken by this process, by outcome', read: () => ({ ...ingest.stats }) });
    }
    const httpIngest = roles.includes('ingest') ? (await import('./ingest/http-ingest.js')).registerHttpIngest(http, { db, verifier, authFailures }) : null;
    if (httpIngest !== null) {
      sources.push({ name: 'mailtally_http_ingest_events_total', help: 'Events POST /v1/events took in this process, by outcome', read: () => ({ ...httpIngest }) });
    }
    if (running !== null) {
      sources.push({
        name: 'mailtally_projector_total',
        help: 'Projector work in this process: events folded, batches written, errors, groups found in and missing from its cache',
        read: () => ({ events: running.stats.events, batches: running.stats.batches, errors: running.stats.errors, cacheHits: running.stats.cacheHits, cacheMisses: running.stats.cacheMisses }),
      });
    }
    const gauges: MetricGauge[] = [];
    if (ingest !== null) {
      gauges.push({ name: 'mailtally_ingest_consuming', help: '1 while the NATS consumer is read; 0 while NATS cannot be reached or the consumer is being recreated (as ingest.consuming in /status)', read: () => (ingest.consuming ? 1 : 0) });
      gauges.push({
        name: 'mailtally_ingest_nats_backlog_messages',
        help: "The NATS consumer's backlog as NATS last reported it (every 2 s): messages not yet delivered (pending) and delivered but not yet acked (ack_pending); none while the consumer is not read",
        label: 'state',
        read: () => {
          const b = ingest.backlog;
          return b === null ? null : { pending: b.pending, ack_pending: b.ackPending };
        },
      });
    }
    const histograms: MetricHistogram[] = [];
    let outbox: Pick<MetricsDeps, 'outbox'> = {};
    if (webhooks !== null) {
      gauges.push(
        { name: 'mailtally_webhook_requests_in_flight', help: "Webhook requests this process has in flight, by lane (first attempts, retries)", label: 'lane', read: () => ({ ...webhooks.stats.inFlight }) },
        { name: 'mailtally_webhook_first_attempts_queued', help: 'Version 1 first attempts read from the log, waiting in this process for a slot of their URL', read: () => webhooks.stats.queued },
        { name: 'mailtally_webhook_throttled_urls', help: 'Callback URLs this process holds below their concurrency cap after throttle answers or timeouts, by lane', label: 'lane', read: () => ({ ...webhooks.stats.throttledUrls }) },
      );
      histograms.push({ name: 'mailtally_webhook_attempt_duration_seconds', help: 'Webhook attempts of this process by time from request to answer (or failure)', read: () => webhooks.stats.latencyMs });
      const { readOutboxBacklog } = await import('./webhooks/outbox-backlog.js');
      outbox = { outbox: readOutboxBacklog };
    }
    registerMetrics(http, { db: db.kysely, sources, gauges, histograms, ...outbox, pools });
    registerStatusRoute(http, {
      db: db.kysely,
      roles,
      extra: () => ({ ...(ingest !== null ? { ingest: { ...ingest.stats, consuming: ingest.consuming, backlog: ingest.backlog } } : {}), ...(httpIngest !== null ? { httpIngest: { ...httpIngest } } : {}), ...(running !== null ? { projector: running.stats } : {}), ...(webhooks !== null ? { dispatcher: webhooks.stats } : {}) }),
    });
    if (roles.includes('api')) {
      const [{ registerOpenApi }, { registerRestApi }, { READ_MODELS_CHANNEL, ResponseCache }, { registerEventCallbackUrlRoutes }, { WEBHOOK_OPENAPI_PATHS }, { registerWebhookAdmin }] = await Promise.all([
        import('./api/openapi.js'),
        import('./api/register.js'),
        import('./api/response-cache.js'),
        import('./webhooks/routes/eventcallbackurl.js'),
        import('./webhooks/routes/openapi-paths.js'),
        import('./webhooks/routes/webhook-admin.js'),
      ]);
      const cache = new ResponseCache({ maxEntries: config.api.cacheEntries, ttlMs: config.api.cacheTtlMs, maxBytes: config.api.cacheMaxBytes });
      if (cache.enabled) {
        const unlisten = await db.listen(READ_MODELS_CHANNEL, () => cache.invalidate());
        cleanup.unshift(unlisten);
      }
      // One request budget per key for /v3/REST and /v1/webhooks/*.
      const rateLimiter = new RateLimiter(config.api.rateLimitPerSecond, config.api.rateLimitBurst);
      registerRestApi(http, { db: requestDb, verifier, authFailures, rateLimiter, limits: config.api, cache, extraRoutes: [registerEventCallbackUrlRoutes] });
      const w = config.webhooks;
      registerWebhookAdmin(http, { db: requestDb, verifier, authFailures, rateLimiter, grouping: { windowMs: w.batchWindowMs, maxEvents: w.batchMaxEvents, maxBytes: w.batchMaxBytes } });
      await registerOpenApi(http, WEBHOOK_OPENAPI_PATHS);
    }
    const url = await http.listen({ port: config.http.port, host: config.http.host }).catch((err: unknown) => {
      throw listenError(config.http, err);
    });
    // Closed first, with NATS intake: stop taking work before the workers drain. Requests in
    // flight get HTTP_SHUTDOWN_GRACE_MS, then their connections are closed.
    cleanup.unshift(async () => {
      await Promise.all([closeServer(http, config.http.shutdownGraceMs), stopIntake()]);
    });
    checkpoint();
    // The workers' stops run after that first step, the last started first.
    for (const start of starts) {
      const stops: (() => Promise<void>)[] = [];
      try {
        await start(stops);
      } finally {
        cleanup.splice(1, 0, ...stops);
      }
      checkpoint();
    }

    log.info({ roles, database: db.kind, nats: config.nats !== null, url }, 'mailtally started');
    let stopping: Promise<void> | null = null;
    return {
      db,
      http,
      natsIngest,
      projector,
      dispatcher,
      url,
      stop: () => (stopping ??= runAll(cleanup)),
    };
  } catch (err) {
    await runAll(cleanup);
    throw err;
  }
}

/** What goes undone when a role is left out, said when the embedded database keeps it from running anywhere else. */
const LEFT_OUT: Record<Role, string> = {
  api: 'statistics and /v3/REST are not served',
  ingest: 'no events are taken in, POST /v1/events answering 404',
  projector: 'the read models do not follow the log',
  dispatcher: 'no webhooks are sent',
};

/**
 * The embedded database admits one process (DATA_DIR's lock): a role left out of `--roles` runs
 * nowhere. Allowed (an ingest-only run before a replay, say), but said once at start.
 */
function warnRolesLeftOut(roles: readonly Role[], log: Logger): void {
  const absent = ALL_ROLES.filter((r) => !roles.includes(r));
  if (absent.length === 0) return;
  log.warn(
    { roles, absent },
    `the embedded database admits one process, so the roles left out run nowhere: ${absent.map((r) => `${r} (${LEFT_OUT[r]})`).join(', ')}; set DATABASE_URL to split the roles over processes`,
  );
}

/** NATS ingest, in this thread or (INGEST_WORKERS > 1) in worker threads. */
async function startNatsIngest(config: Config, db: Db, log: Logger): Promise<RunningIngest> {
  if (config.ingest.workers === 1) return (await import('./ingest/run-nats-ingest.js')).runNatsIngest(config, db, log, 'mailtally-ingest');
  const { IngestWorkers } = await import('./ingest/ingest-workers.js');
  const workers = new IngestWorkers(config, config.ingest.workers, log);
  await workers.start();
  return workers;
}

async function runAll(steps: readonly (() => Promise<void>)[]): Promise<void> {
  for (const step of steps) {
    try {
      await step();
    } catch {
      // keep going: every resource gets its chance to close
    }
  }
}

/** Embedded mode, first start: make a key so the newcomer can call the API right away. */
async function ensureFirstKey(db: Db, log: Logger): Promise<void> {
  if ((await countApiKeys(db.kysely)) > 0) return;
  const key = await createApiKey(db.kysely);
  log.info({ APIKeyID: key.APIKeyID, ApiKey: key.ApiKey }, 'created a first API key (embedded mode); its secret is printed once below');
  process.stdout.write(`\nFirst API key (save the secret, it is not stored in clear):\n${printableKey(key)}\n\n`);
}
