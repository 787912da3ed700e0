import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { listCheckpoints } from '../log/checkpoints.js';
import { countDeadLetters } from '../log/dead-letters.js';
import { logHead } from '../log/read.js';
import { apiErrors } from './errors.js';

export interface StatusReport {
  status: 'ok';
  roles: readonly string[];
  log: { head: number };
  /** Every reader of the log (projections, the webhook dispatcher) with its position and lag. */
  checkpoints: Record<string, { position: number; lag: number; updatedAt: string }>;
  deadLetters: number;
  ingest?: unknown;
}

/**
 * GET /status — no auth, no tenant data: where the log's head is and how far each reader has
 * got, so tools and tests can wait for catch-up.
 */
export function registerStatusRoute(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; roles: readonly string[]; extra?: () => Record<string, unknown> },
): void {
  // Liveness for load balancers: answers without touching the database.
  app.get('/healthz', async (_req, reply) => reply.type('application/json; charset=utf-8').send('{"status":"ok"}'));

  app.get('/status', async () => {
    let report: StatusReport;
    try {
      const [head, checkpoints, deadLetters] = await Promise.all([logHead(deps.db), listCheckpoints(deps.db), countDeadLetters(deps.db)]);
      report = {
        status: 'ok',
        roles: deps.roles,
        log: { head: Number(head) },
        checkpoints: Object.fromEntries(
          checkpoints.map((c) => [c.name, { position: Number(c.position), lag: Number(head - c.position), updatedAt: c.updated_at.toISOString() }]),
        ),
        deadLetters,
      };
    } catch {
      throw apiErrors.unavailable('The database is unavailable');
    }
    return { ...report, ...deps.extra?.() };
  });
}
