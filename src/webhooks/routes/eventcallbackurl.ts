import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type ApiError, apiErrors } from '../../http/errors.js';
import { parseCallbackUrlFilters } from '../callback-url-input.js';
import {
  type CallbackUrl,
  CallbackUrlError,
  createCallbackUrl,
  deleteCallbackUrl,
  findCallbackUrlId,
  getCallbackUrl,
  listCallbackUrls,
  toWire,
  updateCallbackUrl,
} from '../callback-url-store.js';
import { listSchema, pageOf } from '../../api/conventions/paging.js';
import { type RawQuery, int64, parseQuery } from '../../api/conventions/params.js';
import { type RestApiDeps, principalOf, sendRecords } from '../../api/register.js';
import { refuseOtherMethods } from '../../http/methods.js';

/**
 * /v3/REST/eventcallbackurl — a tenant's webhook URLs (the store and its rules are in
 * src/webhooks/): GET list (filters EventType as a name or node-mailjet's number, Status,
 * Backup, Version, APIKey; Limit/Offset/countOnly; Sort by ID), GET item, POST (201), PUT with
 * PATCH semantics (200), DELETE (204, empty; node-mailjet's `{}` body is fine). An item is named
 * by its ID or by the unique key `EventType|Backup` (`open`, `open|true`). Read-only keys
 * get 403 on writes; another tenant's ID is a 404. The POST answer also carries the URL's
 * Standard Webhooks `SigningSecret`, shown this once.
 */

const URL_PATH = '/eventcallbackurl';
const ITEM_PATH = '/eventcallbackurl/:id';
const query = listSchema({ APIKey: int64({ signed: true }).optional() });
const SORT = /^\s*id(?:[\s+]+(asc|desc))?\s*$/i;

export function registerEventCallbackUrlRoutes(scope: FastifyInstance, deps: RestApiDeps): void {
  const db = deps.db;

  scope.get(URL_PATH, async (req, reply) => {
    const principal = principalOf(req);
    const raw = req.query as RawQuery;
    const q = parseQuery(query, raw);
    const page = pageOf(q);
    const filters = parseCallbackUrlFilters(raw);
    if (!filters.ok) throw apiErrors.badRequest(`Invalid parameter: ${filters.message}`);
    const descending = sortDescending(q.Sort);
    if (q.APIKey !== undefined && String(q.APIKey) !== principal.apiKeyId) return sendRecords(reply, { rows: [], total: 0 }, page.countOnly);
    const result = await listCallbackUrls(db, principal.apiKeyId, filters.value, { limit: page.limit, offset: page.offset, descending });
    return sendRecords(reply, { rows: result.rows.map(toWire), total: result.total }, page.countOnly);
  });

  scope.get(ITEM_PATH, async (req, reply) => {
    const principal = principalOf(req);
    const id = await findCallbackUrlId(db, principal.apiKeyId, idOf(req));
    return sendOne(reply, id === null ? null : await getCallbackUrl(db, principal.apiKeyId, id));
  });

  // A read-only key is refused before the body is read: a body it may not send cannot turn the 403 into a 400 or a 415.
  const writes = { onRequest: async (req: FastifyRequest) => refuseReadOnly(req) };

  scope.post(URL_PATH, writes, async (req, reply) => {
    const principal = principalOf(req);
    const { callbackUrl, secret } = await translated(() => createCallbackUrl(db, principal.apiKeyId, req.body));
    return sendRecords(reply, { rows: [{ ...toWire(callbackUrl), SigningSecret: secret }], total: 1 }, false, 201);
  });

  scope.put(ITEM_PATH, writes, async (req, reply) => {
    const principal = principalOf(req);
    const id = await findCallbackUrlId(db, principal.apiKeyId, idOf(req));
    // An item named by nothing of the tenant's still has its body checked first (400), then 404: 0 is no ID.
    const updated = await translated(() => updateCallbackUrl(db, principal.apiKeyId, id ?? 0n, req.body ?? {}));
    return sendOne(reply, updated);
  });

  scope.delete(ITEM_PATH, writes, async (req, reply) => {
    const principal = principalOf(req);
    const id = await findCallbackUrlId(db, principal.apiKeyId, idOf(req));
    if (id === null || !(await deleteCallbackUrl(db, principal.apiKeyId, id))) throw apiErrors.notFound();
    return reply.code(204).send();
  });

  refuseOtherMethods(scope, URL_PATH, ['GET', 'POST']);
  refuseOtherMethods(scope, ITEM_PATH, ['GET', 'PUT', 'DELETE']);
}

function refuseReadOnly(req: FastifyRequest): void {
  if (principalOf(req).readOnly) throw apiErrors.forbidden();
}

const idOf = (req: FastifyRequest): string => (req.params as { id?: string }).id ?? '';

function sendOne(reply: FastifyReply, found: CallbackUrl | null): FastifyReply {
  if (found === null) throw apiErrors.notFound();
  return sendRecords(reply, { rows: [toWire(found)], total: 1 });
}

/** The store's 400s (invalid input, a duplicate) as API errors. */
async function translated<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof CallbackUrlError) throw apiErrors.badRequest(err.message) as ApiError;
    throw err;
  }
}

/** `ID`, `ID DESC` (any case, `+` for the space); eventcallbackurl sorts by nothing else. */
function sortDescending(sort: string | undefined): boolean {
  if (sort === undefined || sort.trim() === '') return false;
  const m = SORT.exec(sort);
  if (m === null) throw apiErrors.badRequest(`Invalid parameter Sort: "${sort.trim()}" is not a sortable property of eventcallbackurl; sort by ID, optionally followed by DESC`);
  return (m[1] ?? '').toLowerCase() === 'desc';
}
