import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { Database } from '../db/schema.js';
import { type AuthFailures, authenticate } from '../http/auth.js';
import { apiErrors } from '../http/errors.js';
import { refuseOtherMethods } from '../http/methods.js';
import type { KeyVerifier, Principal } from '../keys/key-store.js';
import { toJson } from './conventions/json.js';
import { pageOf } from './conventions/paging.js';
import { type RawQuery, bareName, parseQuery } from './conventions/params.js';
import { AuthFailureLimiter, RateLimiter } from './conventions/rate-limit.js';
import type { ListResult, Resource, WireRecord } from './resource.js';
import type { ResponseCache } from './response-cache.js';
import { RESOURCES } from './routes/index.js';

/**
 * Mounts Mailjet's REST API at /v3/REST: Basic auth against the key store (failed attempts
 * limited per address), a per-key rate limit, every resource's list and item routes in the
 * {Count, Data, Total} envelope, and 405 for methods a resource does not take. Resource and
 * parameter names match without regard to case (the router is case-insensitive).
 */

export const REST_PREFIX = '/v3/REST';

export interface RestApiDeps {
  readonly db: Kysely<Database>;
  readonly verifier: KeyVerifier;
  readonly limits: { readonly rateLimitPerSecond: number; readonly rateLimitBurst: number; readonly authFailuresPerMinute: number };
  /** Failed Basic-auth attempts per address, shared with the other routes that take Basic auth; absent = this API's own. */
  readonly authFailures?: AuthFailures;
  /** Requests per key (API_RATE_LIMIT), shared with /v1/webhooks/*; absent = this API's own. */
  readonly rateLimiter?: RateLimiter;
  /** Answers kept until the read models change (see response-cache.ts); absent = no cache. */
  readonly cache?: ResponseCache;
  /** Write resources (e.g. eventcallbackurl) register their own routes on the authenticated scope. */
  readonly extraRoutes?: readonly ((scope: FastifyInstance, deps: RestApiDeps) => void)[];
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export function registerRestApi(app: FastifyInstance, deps: RestApiDeps, resources: readonly Resource[] = RESOURCES): void {
  const limiter = deps.rateLimiter ?? new RateLimiter(deps.limits.rateLimitPerSecond, deps.limits.rateLimitBurst);
  const failures = deps.authFailures ?? new AuthFailureLimiter(deps.limits.authFailuresPerMinute, 60_000);
  app.decorateRequest('principal', null);

  void app.register(
    async (scope) => {
      scope.addHook('onRequest', async (req) => {
        req.principal = await authenticate(req, deps.verifier, failures);
        const wait = limiter.take(req.principal.apiKeyId);
        if (wait > 0) throw apiErrors.tooManyRequests(wait);
      });

      for (const resource of resources) mountResource(scope, deps.db, resource, deps.cache ?? null);
      for (const extra of deps.extraRoutes ?? []) extra(scope, deps);
    },
    { prefix: REST_PREFIX },
  );
}

/** The authenticated tenant of a request under /v3/REST. */
export function principalOf(req: FastifyRequest): Principal {
  if (req.principal === null) throw apiErrors.unauthorized();
  return req.principal;
}

export function sendRecords(reply: FastifyReply, result: ListResult, countOnly = false, status = 200): FastifyReply {
  return sendJson(reply, envelopeJson(result, countOnly), status);
}

const envelopeJson = (result: ListResult, countOnly: boolean): string =>
  toJson(countOnly ? { Count: result.total, Data: [], Total: result.total } : { Count: result.rows.length, Data: result.rows, Total: result.total });

const sendJson = (reply: FastifyReply, json: string, status = 200): FastifyReply => reply.code(status).type('application/json; charset=utf-8').send(json);

const READ_ONLY = ['GET'] as const;

function mountResource(scope: FastifyInstance, db: Kysely<Database>, resource: Resource, cache: ResponseCache | null): void {
  const url = `/${resource.name}`;
  /** Serves from the cache, or computes, answers and keeps the answer (200s only). */
  const cached = async (req: FastifyRequest, reply: FastifyReply, compute: () => Promise<string>): Promise<FastifyReply> => {
    if (cache === null || !cache.enabled) return sendJson(reply, await compute());
    return sendJson(reply, await cache.answer(`${principalOf(req).apiKeyId}\n${req.url}`, compute));
  };

  const refuseUnsupported = unsupportedParameters(resource);
  scope.get(url, async (req, reply) =>
    cached(req, reply, async () => {
      const rawQuery = req.query as RawQuery;
      refuseUnsupported(rawQuery);
      const query = parseQuery(resource.query as z.ZodObject, rawQuery, resource.aliases) as Record<string, unknown> & Parameters<typeof pageOf>[0];
      const page = pageOf(query);
      const result = await resource.list({ db, principal: principalOf(req), rawQuery, query, page });
      return envelopeJson(result, page.countOnly);
    }),
  );
  refuseOtherMethods(scope, url, READ_ONLY);

  for (const item of resource.items ?? []) {
    const itemUrl = `${url}/${item.path}`;
    scope.get(itemUrl, async (req, reply) =>
      cached(req, reply, async () => {
        refuseUnsupported(req.query as RawQuery);
        const records: readonly WireRecord[] = await item.find(
          { db, principal: principalOf(req), rawQuery: req.query as RawQuery },
          req.params as Record<string, string>,
        );
        if (records.length === 0) throw apiErrors.notFound();
        return envelopeJson({ rows: records, total: records.length }, false);
      }),
    );
    refuseOtherMethods(scope, itemUrl, READ_ONLY);
  }
}

/**
 * For a resource's query: a 400 naming the first parameter (in any case, or an alias of it) the
 * resource does not answer. Its names are looked up once, when the resource is mounted.
 */
function unsupportedParameters(resource: Resource): (raw: RawQuery) => void {
  const byName = new Map(Object.entries(resource.unsupported ?? {}).map(([name, why]) => [name.toLowerCase(), { name, why }]));
  return (raw) => {
    if (byName.size === 0) return;
    for (const key of Object.keys(raw)) {
      const lower = bareName(key).toLowerCase();
      const found = byName.get(resource.aliases?.[lower] ?? lower);
      if (found !== undefined) throw apiErrors.badRequest(`Invalid parameter ${found.name}: not supported on ${resource.name} (${found.why})`);
    }
  };
}
