import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { type AuthFailures, authenticateFirst } from '../../http/auth.js';
import { describeError } from '../../db/errors.js';
import { apiErrors } from '../../http/errors.js';
import type { KeyVerifier } from '../../keys/key-store.js';
import type { RateLimiter } from '../../api/conventions/rate-limit.js';
import type { GroupingLimits } from '../enqueue.js';
import { waitingForKey } from '../outbox-backlog.js';
import { MAX_REPLAY_EVENTS, replayWebhookEvents, parseReplayRequest } from '../replay-webhooks.js';
import { attemptToWire, listWebhookAttempts, parseAttemptFilters } from '../webhook-attempts.js';
import { toJson } from '../../api/conventions/json.js';
import { listSchema, pageOf } from '../../api/conventions/paging.js';
import { type RawQuery, parseQuery } from '../../api/conventions/params.js';
import { refuseOtherMethods } from '../../http/methods.js';

/**
 * The webhook tools beside Mailjet's API (Basic auth, each key sees its own):
 * - GET /v1/webhooks/attempts — every delivery attempt, newest first: filters CallbackUrlID,
 *   Outcome (delivered, failed, expired, dropped), WebhookID, FromTS/ToTS; Limit/Offset/countOnly;
 *   answered in the {Count, Data, Total} envelope.
 * - POST /v1/webhooks/replay — sends a range of the key's events again to its URLs:
 *   {FromPosition | FromTS, ToPosition?, ToTS?, EventType?} → 202 {Events, Deliveries, NextPosition}.
 *   Read-only keys get 403; one replay per key at a time in a process (another meanwhile: 429),
 *   and none while the key has `maxReplayBacklog` deliveries or more waiting in the outbox (429:
 *   one tenant's replays cannot pile up deliveries ahead of every other tenant's).
 * Both count against the key's request budget (API_RATE_LIMIT), as /v3/REST requests do.
 */

export interface WebhookAdminDeps {
  readonly db: Kysely<Database>;
  readonly verifier: KeyVerifier;
  /** Failed Basic-auth attempts per address, shared with the other routes that take Basic auth. */
  readonly authFailures?: AuthFailures;
  readonly grouping: GroupingLimits;
  /** Events replayed per call at most (NextPosition says where to continue). */
  readonly maxReplayEvents?: number;
  /** A replay is refused while the key has this many deliveries waiting in the outbox (default MAX_REPLAY_BACKLOG). */
  readonly maxReplayBacklog?: number;
  /** Requests per key (API_RATE_LIMIT), shared with /v3/REST. */
  readonly rateLimiter?: RateLimiter;
}

const paging = listSchema({});

/** Deliveries of a key waiting in the outbox past which its replays are refused for now: one replay call's most. */
const MAX_REPLAY_BACKLOG = MAX_REPLAY_EVENTS;

export function registerWebhookAdmin(app: FastifyInstance, deps: WebhookAdminDeps): void {
  const reader = authenticateFirst(deps.verifier, deps.authFailures);
  const writer = authenticateFirst(deps.verifier, deps.authFailures, { writes: true });
  /** Credentials, then the key's request budget: both before the body is read. */
  const admitted = (auth: typeof reader) => async (req: FastifyRequest) => {
    await auth.onRequest(req);
    const wait = deps.rateLimiter?.take(auth.principalOf(req).apiKeyId) ?? 0;
    if (wait > 0) throw apiErrors.tooManyRequests(wait);
  };
  /** Keys with a replay running in this process: one at a time per key. */
  const replaying = new Set<string>();

  refuseOtherMethods(app, '/v1/webhooks/attempts', ['GET']);
  refuseOtherMethods(app, '/v1/webhooks/replay', ['POST']);
  app.get('/v1/webhooks/attempts', { onRequest: admitted(reader) }, async (req, reply) => {
    const principal = reader.principalOf(req);
    const raw = req.query as RawQuery;
    const page = pageOf(parseQuery(paging, raw));
    const filters = parseAttemptFilters(raw);
    if (!filters.ok) throw apiErrors.badRequest(`Invalid parameter: ${filters.message}`);
    const result = await listWebhookAttempts(deps.db, principal.apiKeyId, filters.value, page);
    const body = page.countOnly ? { Count: result.total, Data: [], Total: result.total } : { Count: result.rows.length, Data: result.rows.map(attemptToWire), Total: result.total };
    return reply.type('application/json; charset=utf-8').send(toJson(body));
  });

  app.post('/v1/webhooks/replay', { onRequest: admitted(writer) }, async (req, reply) => {
    const principal = writer.principalOf(req);
    const range = parseReplayRequest(req.body ?? {});
    if (!range.ok) throw apiErrors.badRequest(range.message);
    if (replaying.has(principal.apiKeyId)) throw apiErrors.tooManyRequests(1, 'A replay of this API key is already running; send the next one when it has answered');
    replaying.add(principal.apiKeyId);
    let r: Awaited<ReturnType<typeof replayWebhookEvents>>;
    try {
      const backlog = deps.maxReplayBacklog ?? MAX_REPLAY_BACKLOG;
      if ((await waitingForKey(deps.db, principal.apiKeyId, backlog)) >= backlog) {
        throw apiErrors.tooManyRequests(60, `This API key has ${backlog} deliveries or more waiting to be sent; replay again once they have gone out (GET /v1/webhooks/attempts shows them)`);
      }
      r = await replayWebhookEvents(deps.db, principal.apiKeyId, range.value, deps.grouping, deps.maxReplayEvents);
    } finally {
      replaying.delete(principal.apiKeyId);
    }
    if (r.interruptedBy !== undefined) req.log.warn({ err: describeError(r.interruptedBy), nextPosition: String(r.nextPosition) }, 'webhook replay stopped at a failed batch; answered with where to go on');
    return reply
      .code(202)
      .type('application/json; charset=utf-8')
      .send(toJson({ Events: r.events, Deliveries: r.deliveries, NextPosition: r.nextPosition }));
  });
}
