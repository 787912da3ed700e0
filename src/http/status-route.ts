import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { listCheckpoints } from '../log/checkpoints.js';
import { countDeadLetters } from '../log/dead-letters.js';
import { logHead } from '../log/read.js';
import { apiErrors } from './errors.js';
import { refuseOtherMethods } from './methods.js';

export interface StatusReport {
  status: 'ok';
  roles: readonly string[];
  log: { head: number };
  /** Every reader of the log (projections, the webhook dispatcher) with its position and lag. */
  checkpoints: Record<string, { position: number; lag: number; updatedAt: string }>;
  /** Exact up to 10,000, then Postgres's estimate (`deadLettersExact` false). */
  deadLetters: number;
  deadLettersExact: boolean;
  ingest?: unknown;
}

/**
 * GET /status — no auth, no tenant data: where the log's head is and how far each reader has
 * got, so tools and tests can wait for catch-up. One reading of the database at a time, however
 * many requests come: those that arrive during a reading share the next one, which starts when
 * it ends (so every answer was read after its request arrived). An unauthenticated caller cannot
 * tie up the connection pool with it.
 */
export function registerStatusRoute(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; roles: readonly string[]; extra?: () => Record<string, unknown> },
): void {
  // Liveness for load balancers: answers without touching the database.
  app.get('/healthz', async (_req, reply) => reply.type('application/json; charset=utf-8').send('{"status":"ok"}'));
  refuseOtherMethods(app, '/healthz', ['GET']);
  refuseOtherMethods(app, '/status', ['GET']);

  const read = async (): Promise<StatusReport> => {
    const [head, checkpoints, deadLetters] = await Promise.all([logHead(deps.db), listCheckpoints(deps.db), countDeadLetters(deps.db)]);
    return {
      status: 'ok',
      roles: deps.roles,
      log: { head: Number(head) },
      checkpoints: Object.fromEntries(
        checkpoints.map((c) => [c.name, { position: Number(c.position), lag: Number(head - c.position), updatedAt: c.updated_at.toISOString() }]),
      ),
      deadLetters: deadLetters.count,
      deadLettersExact: deadLetters.exact,
    };
  };

  /** The reading in flight, and the one the requests that came during it will share. */
  let current: Promise<StatusReport> | null = null;
  let next: Promise<StatusReport> | null = null;
  const reading = (): Promise<StatusReport> => {
    if (current === null) {
      current = read().finally(() => {
        current = null;
      });
      return current;
    }
    next ??= current
      .catch(() => {})
      .then(() => {
        next = null;
        return reading();
      });
    return next;
  };

  app.get('/status', async () => {
    let report: StatusReport;
    try {
      report = await reading();
    } catch {
      throw apiErrors.unavailable('The database is unavailable');
    }
    return { ...report, ...deps.extra?.() };
  });
}
