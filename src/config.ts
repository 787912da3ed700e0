import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { allowList, bool, int, natsServers, natsToken, retrySchedule, trustProxy, url } from './config-values.js';

/**
 * Where package.json is. A relative DATA_DIR is taken from here, not from the current directory:
 * `npm start` runs in the project root, and `npx mailtally` from a subdirectory must find the same database.
 */
const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The only reader of process.env: every setting, validated at start, frozen. */

export { MAX_RETRY_DELAY_SECONDS } from './config-values.js';

/**
 * Counter rows a rebuild holds in memory before spilling them (src/projector/counter-spill.ts).
 * Smaller totals also cost the garbage collector less: on a 1.9M-event log (765k counter rows),
 * 100k gave a peak RSS of 0.94–0.97 GiB and 60k–64k events/s, against 1.9–2.0 GiB and 54k–58k
 * holding every row (bench/README.md).
 */
export const DEFAULT_REPLAY_COUNTER_ROWS = 100_000;
/**
 * Groups the live projector keeps between batches. Each holds its events as objects, and a
 * larger cache is more old-generation heap for the collector to go through: at 5k events/s,
 * with the service's V8 options, 15,000 and 50,000 gave visible p99s of 82–143 ms against
 * 37–66 ms with 5,000 in alternated runs of one hour (bench/README.md, Freshness), while a
 * backlog drains about as fast.
 */
const DEFAULT_PROJECTOR_CACHE_GROUPS = 5_000;

/** A Postgres memory size as `REPLAY_WORK_MEM` takes it (it goes into a `SET` statement as it is). */
export const WORK_MEM_PATTERN = /^[1-9][0-9]{0,6}(kB|MB|GB)$/;

const envSchema = z.object({
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  NATS_URL: natsServers.optional(),
  NATS_STREAM: natsToken.default('MAIL_EVENTS'),
  NATS_SUBJECT_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, { message: 'must be dot-separated tokens, e.g. mail.events' })
    .default('mail.events'),
  NATS_CONSUMER: natsToken.default('mailtally-ingest'),
  PORT: int(0, 65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  TLS_CERT: z.string().min(1).optional(),
  TLS_KEY: z.string().min(1).optional(),
  ALLOW_INSECURE_HTTP: bool.default(false),
  TRUST_PROXY: trustProxy.default(false),
  HTTP_REQUEST_TIMEOUT_MS: int(1000, 3_600_000).default(60_000),
  HTTP_SHUTDOWN_GRACE_MS: int(0, 600_000).default(5000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  PG_POOL_SIZE: int(2, 200).default(10),
  INGEST_BATCH_SIZE: int(1, 10_000).default(2000),
  INGEST_BATCH_WAIT_MS: int(0, 10_000).default(5),
  INGEST_BATCH_BYTES: int(65_536, 268_435_456).default(8_388_608),
  INGEST_ACK_WAIT_MS: int(1000, 3_600_000).default(30_000),
  INGEST_WORKERS: int(1, 64).default(1),
  SHUTDOWN_TIMEOUT_MS: int(1000, 600_000).default(30_000),
  PROJECTOR_BATCH_SIZE: int(1, 100_000).default(5000),
  PROJECTOR_POLL_MS: int(10, 60_000).default(1000),
  PROJECTOR_LEASE_MS: int(500, 600_000).default(15_000),
  PROJECTOR_CACHE_GROUPS: int(0, 10_000_000).default(DEFAULT_PROJECTOR_CACHE_GROUPS),
  PROJECTOR_MIN_INTERVAL_MS: int(0, 10_000).default(0),
  REPLAY_BATCH_SIZE: int(1000, 1_000_000).default(50_000),
  REPLAY_COUNTER_ROWS: int(1000, 100_000_000).default(DEFAULT_REPLAY_COUNTER_ROWS),
  REPLAY_ENGINE: z.enum(['sql', 'fold'], { message: 'must be sql or fold' }).default('sql'),
  REPLAY_WORK_MEM: z
    .string()
    .regex(WORK_MEM_PATTERN, { message: "must be a Postgres memory size, e.g. '256MB'" })
    .optional(),
  API_RATE_LIMIT: int(0, 1_000_000).default(200),
  API_RATE_BURST: int(1, 1_000_000).default(400),
  API_AUTH_FAILURE_LIMIT: int(1, 1_000_000).default(30),
  API_CACHE_ENTRIES: int(0, 1_000_000).default(10_000),
  API_CACHE_TTL_MS: int(0, 3_600_000).default(5000),
  API_CACHE_MAX_MB: int(1, 65_536).default(64),
  API_STATEMENT_TIMEOUT_MS: int(0, 3_600_000).default(30_000),
  MAILTALLY_API_KEY: z.string().min(1).optional(),
  MAILTALLY_SECRET_KEY: z.string().min(1).optional(),
  WEBHOOK_ALLOWLIST: allowList.default([]),
  WEBHOOK_RETRY_SCHEDULE: retrySchedule.default([5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 29845]),
  WEBHOOK_TIMEOUT_MS: int(100, 120_000).default(15_000),
  WEBHOOK_CONCURRENCY: int(1, 10_000).default(1024),
  WEBHOOK_URL_CONCURRENCY: int(1, 1000).default(16),
  WEBHOOK_ADAPTIVE_CONCURRENCY: bool.default(true),
  WEBHOOK_RETRY_CONCURRENCY: int(1, 10_000).default(256),
  WEBHOOK_BATCH_WINDOW_MS: int(0, 60_000).default(1000),
  WEBHOOK_BATCH_MAX_EVENTS: int(1, 10_000).default(100),
  WEBHOOK_BATCH_MAX_BYTES: int(1024, 10_485_760).default(262_144),
  WEBHOOK_POLL_MS: int(10, 60_000).default(250),
  WEBHOOK_LEASE_MS: int(500, 600_000).default(15_000),
  WEBHOOK_FANOUT_BATCH_SIZE: int(1, 100_000).default(5000),
  WEBHOOK_ATTEMPTS_RETENTION_DAYS: int(0, 3650).default(30),
});

/** Every variable mailtally reads (`.env.example` and README's table list each one). */
export const CONFIG_KEYS: readonly string[] = Object.keys(envSchema.shape);

export type Env = Record<string, string | undefined>;

export interface Config {
  readonly database: { readonly kind: 'postgres'; readonly url: string; readonly poolSize: number } | { readonly kind: 'pglite'; readonly dataDir: string };
  readonly nats: { readonly servers: readonly string[]; readonly stream: string; readonly subjectPrefix: string; readonly consumer: string } | null;
  readonly http: {
    readonly port: number;
    readonly host: string;
    readonly tls: { readonly certFile: string; readonly keyFile: string } | null;
    readonly allowInsecureHttp: boolean;
    /** Proxies whose `X-Forwarded-For` names the client: none (false), or their addresses and CIDRs. */
    readonly trustProxy: false | readonly string[];
    /** How long a request (headers and body) may take to arrive; past it, a 408 and the connection closed. */
    readonly requestTimeoutMs: number;
    /** At shutdown, how long requests in flight may go on before their connections are closed. */
    readonly shutdownGraceMs: number;
  };
  readonly logLevel: string;
  /** Per-key request budget (0 = off) and failed logins allowed per client address per minute. */
  readonly api: {
    readonly rateLimitPerSecond: number;
    readonly rateLimitBurst: number;
    readonly authFailuresPerMinute: number;
    /** Answers kept until the read models change (0 entries = no cache), at most `cacheTtlMs` old. */
    readonly cacheEntries: number;
    readonly cacheTtlMs: number;
    /** Characters of all kept answers together, their keys included (`response-cache.ts`). */
    readonly cacheMaxBytes: number;
    /** Postgres cancels an API request's statement past this (0 = never); the request gets a 503. */
    readonly statementTimeoutMs: number;
  };
  readonly ingest: { readonly batchSize: number; readonly batchBytes: number; readonly batchWaitMs: number; readonly ackWaitMs: number; readonly workers: number };
  /** How long `serve` waits on SIGTERM for its roles to drain before it exits regardless. */
  readonly shutdownTimeoutMs: number;
  readonly projector: { readonly batchSize: number; readonly pollMs: number; readonly leaseMs: number; readonly cacheGroups: number; readonly minIntervalMs: number; readonly replayBatchSize: number; readonly replayCounterRows: number;
    /** How `mailtally replay` rebuilds: 'sql' (set-based, by the database) or 'fold' (as the live projector folds). */
    readonly replayEngine: 'sql' | 'fold';
    /** `work_mem` of each set-based rebuild statement; unset: `DEFAULT_REBUILD_WORK_MEM` (set-rebuild.ts). */
    readonly replayWorkMem: string | undefined;
  };
  readonly webhooks: {
    readonly allowList: readonly string[];
    readonly retryScheduleSeconds: readonly number[];
    /** One deadline per request: connect + TLS + headers + body. */
    readonly timeoutMs: number;
    /** First attempts in flight per process, and per URL; retries in flight per process. */
    readonly concurrency: number;
    readonly urlConcurrency: number;
    readonly adaptiveConcurrency: boolean;
    readonly retryConcurrency: number;
    /** Version 2 grouping: how long a batch gathers events, and its limits. */
    readonly batchWindowMs: number;
    readonly batchMaxEvents: number;
    readonly batchMaxBytes: number;
    readonly pollMs: number;
    /** Lease of the one process that moves events from the log into the outbox. */
    readonly leaseMs: number;
    readonly fanOutBatchSize: number;
    readonly attemptsRetentionDays: number;
  };
  /** Credentials the CLI uses when it talks to the HTTP API (`publish` without NATS). */
  readonly client: { readonly apiKey: string | null; readonly secretKey: string | null };
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Empty strings count as unset, so `PORT=` in a .env file falls back to the default. */
function withoutEmpty(env: Env): Env {
  return Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
}

export function loadConfig(env: Env = process.env): Config {
  const parsed = envSchema.safeParse(withoutEmpty(env));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => {
      const name = String(i.path[0] ?? 'environment');
      const value = env[name];
      const shown =
        name === 'DATABASE_URL' || name.includes('KEY') || value === undefined
          ? ''
          : ` (got ${JSON.stringify(name === 'NATS_URL' ? value.split(',').map(withoutPassword).join(',') : value)})`;
      return `${name} ${i.message}${shown}`;
    });
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  const problems: string[] = [];
  if ((e.TLS_CERT === undefined) !== (e.TLS_KEY === undefined)) {
    problems.push('TLS_CERT and TLS_KEY must be set together');
  }
  for (const [name, file] of [['TLS_CERT', e.TLS_CERT], ['TLS_KEY', e.TLS_KEY]] as const) {
    const problem = file === undefined ? null : unreadableFileProblem(file);
    if (problem !== null) problems.push(`${name} ${problem} (got ${JSON.stringify(file)})`);
  }
  if (problems.length === 0 && e.TLS_CERT !== undefined && e.TLS_KEY !== undefined) {
    const problem = tlsPairProblem(e.TLS_CERT, e.TLS_KEY);
    if (problem !== null) problems.push(`TLS_CERT and TLS_KEY are not a PEM certificate and its private key: ${problem}`);
  }
  if (e.INGEST_WORKERS > 1 && e.DATABASE_URL === undefined) {
    problems.push('INGEST_WORKERS above 1 needs DATABASE_URL (the embedded database takes one writer)');
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const config: Config = {
    database:
      e.DATABASE_URL !== undefined
        ? { kind: 'postgres', url: e.DATABASE_URL, poolSize: e.PG_POOL_SIZE }
        : { kind: 'pglite', dataDir: resolve(PROJECT_ROOT, e.DATA_DIR) },
    nats:
      e.NATS_URL !== undefined
        ? { servers: e.NATS_URL, stream: e.NATS_STREAM, subjectPrefix: e.NATS_SUBJECT_PREFIX, consumer: e.NATS_CONSUMER }
        : null,
    http: {
      port: e.PORT,
      host: e.HOST,
      tls: e.TLS_CERT !== undefined && e.TLS_KEY !== undefined ? { certFile: e.TLS_CERT, keyFile: e.TLS_KEY } : null,
      allowInsecureHttp: e.ALLOW_INSECURE_HTTP,
      trustProxy: e.TRUST_PROXY,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      shutdownGraceMs: e.HTTP_SHUTDOWN_GRACE_MS,
    },
    logLevel: e.LOG_LEVEL,
    api: {
      rateLimitPerSecond: e.API_RATE_LIMIT,
      rateLimitBurst: e.API_RATE_BURST,
      authFailuresPerMinute: e.API_AUTH_FAILURE_LIMIT,
      cacheEntries: e.API_CACHE_ENTRIES,
      cacheTtlMs: e.API_CACHE_TTL_MS,
      cacheMaxBytes: e.API_CACHE_MAX_MB * 1024 * 1024,
      statementTimeoutMs: e.API_STATEMENT_TIMEOUT_MS,
    },
    ingest: { batchSize: e.INGEST_BATCH_SIZE, batchBytes: e.INGEST_BATCH_BYTES, batchWaitMs: e.INGEST_BATCH_WAIT_MS, ackWaitMs: e.INGEST_ACK_WAIT_MS, workers: e.INGEST_WORKERS },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    projector: { batchSize: e.PROJECTOR_BATCH_SIZE, pollMs: e.PROJECTOR_POLL_MS, leaseMs: e.PROJECTOR_LEASE_MS, cacheGroups: e.PROJECTOR_CACHE_GROUPS, minIntervalMs: e.PROJECTOR_MIN_INTERVAL_MS, replayBatchSize: e.REPLAY_BATCH_SIZE, replayCounterRows: e.REPLAY_COUNTER_ROWS, replayEngine: e.REPLAY_ENGINE, replayWorkMem: e.REPLAY_WORK_MEM },
    webhooks: {
      allowList: e.WEBHOOK_ALLOWLIST,
      retryScheduleSeconds: e.WEBHOOK_RETRY_SCHEDULE,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      urlConcurrency: e.WEBHOOK_URL_CONCURRENCY,
      adaptiveConcurrency: e.WEBHOOK_ADAPTIVE_CONCURRENCY,
      retryConcurrency: e.WEBHOOK_RETRY_CONCURRENCY,
      batchWindowMs: e.WEBHOOK_BATCH_WINDOW_MS,
      batchMaxEvents: e.WEBHOOK_BATCH_MAX_EVENTS,
      batchMaxBytes: e.WEBHOOK_BATCH_MAX_BYTES,
      pollMs: e.WEBHOOK_POLL_MS,
      leaseMs: e.WEBHOOK_LEASE_MS,
      fanOutBatchSize: e.WEBHOOK_FANOUT_BATCH_SIZE,
      attemptsRetentionDays: e.WEBHOOK_ATTEMPTS_RETENTION_DAYS,
    },
    client: { apiKey: e.MAILTALLY_API_KEY ?? null, secretKey: e.MAILTALLY_SECRET_KEY ?? null },
  };
  return deepFreeze(config);
}

/** Why a file cannot be read (it is read when the HTTP server starts, after the database work), or null. */
function unreadableFileProblem(file: string): string | null {
  try {
    if (statSync(file).isDirectory()) return 'must be a file, not a directory';
    accessSync(file, constants.R_OK);
    return null;
  } catch (err) {
    const code = (err as { code?: string }).code;
    return code === 'ENOENT' ? 'names no file' : code === 'EACCES' ? 'names a file this process may not read' : `names a file that cannot be read (${code ?? String(err)})`;
  }
}

/**
 * A connection URL fit for a message or a log: a password is left out; a user name with no
 * password becomes `***` unless the URL is Postgres's (elsewhere, NATS's included, it is a
 * token), and so do query parameters that carry secrets (`password`, `sslpassword`, `token`,
 * …). Text that does not parse as a URL is shown only up to its `://`.
 */
export function withoutPassword(url: string): string {
  if (!url.includes('://')) return url;
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '';
    else if (u.username !== '' && !/^postgres(ql)?:$/.test(u.protocol)) u.username = '***';
    for (const name of [...u.searchParams.keys()]) if (/pass|token|secret|key/i.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return `${url.slice(0, url.indexOf('://'))}://…`;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** What Node's TLS says of a certificate and key file pair (not PEM, a key that is not the certificate's…), or null. */
function tlsPairProblem(certFile: string, keyFile: string): string | null {
  try {
    createSecureContext({ cert: readFileSync(certFile), key: readFileSync(keyFile) });
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
