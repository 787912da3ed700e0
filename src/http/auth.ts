import type { FastifyRequest } from 'fastify';
import { credentialKey, type KeyVerifier, type Principal } from '../keys/key-store.js';
import { ApiError, apiErrors } from './errors.js';

/** Failed attempts per client address (src/api/conventions/rate-limit.ts has the one in use). */
export interface AuthFailures {
  /** Seconds until the address may try again, or 0. */
  blockedFor(address: string): number;
  fail(address: string): void;
  /**
   * A check of credentials not yet proven starts for the address (`credentials`: which ones):
   * until `end`, it counts as a failure, so guesses sent all at once meet the limit as guesses
   * sent one after another do. The same credentials checked several times at once count once.
   */
  begin(address: string, credentials: string): void;
  end(address: string, credentials: string): void;
}

/**
 * HTTP Basic (API key as user, secret key as password) → the tenant, or a 401. With `failures`
 * (every route taking Basic auth shares one), an address past its failed attempts (those still
 * being checked included) gets 429 before its credentials are checked, so secrets cannot be
 * guessed at speed on any route, one at a time or all at once — but credentials this process
 * has already verified still pass (checked again once their cached check expired): someone
 * sharing the address (a NAT, a proxy) cannot lock its tenants out by failing on purpose.
 */
export async function authenticate(req: FastifyRequest, verifier: KeyVerifier, failures?: AuthFailures | null): Promise<Principal> {
  if (failures == null) {
    const { publicKey, secret } = credentialsOf(req);
    return check(verifier, publicKey, secret);
  }
  const blocked = failures.blockedFor(req.ip);
  const tooMany = () => apiErrors.tooManyRequests(blocked, 'Too many failed authentication attempts from this address; retry later');
  let given: { publicKey: string; secret: string };
  try {
    given = credentialsOf(req);
  } catch (err) {
    if (blocked > 0) throw tooMany();
    failures.fail(req.ip);
    throw err;
  }
  const { publicKey, secret } = given;
  const credentials = credentialKey(publicKey, secret);
  const known = verifier.cached(credentials);
  if (known !== undefined) return known;
  if (blocked > 0 && !verifier.proven(credentials)) throw tooMany();
  failures.begin(req.ip, credentials);
  try {
    return await check(verifier, publicKey, secret);
  } catch (err) {
    if (err instanceof ApiError && err.statusCode === 401) failures.fail(req.ip);
    throw err;
  } finally {
    failures.end(req.ip, credentials);
  }
}

function credentialsOf(req: FastifyRequest): { publicKey: string; secret: string } {
  const header = req.headers.authorization;
  const match = header !== undefined ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (match === null) throw apiErrors.unauthorized();
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw apiErrors.unauthorized();
  return { publicKey: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

async function check(verifier: KeyVerifier, publicKey: string, secret: string): Promise<Principal> {
  const principal = await verifier.verify(publicKey, secret);
  if (principal === null) throw apiErrors.unauthorized();
  return principal;
}

/**
 * `authenticate` as a route's `onRequest` hook, for routes outside /v3/REST (whose scope has its
 * own): credentials are checked, and the failed-login limit applied, before the body is read, so
 * an unauthenticated client cannot make the server buffer and parse a large body. With
 * `writes`, a read-only key is refused (403) there too. `principalOf` gives the handler the tenant.
 */
export function authenticateFirst(verifier: KeyVerifier, failures?: AuthFailures | null, opts: { writes?: boolean; readOnlyMessage?: string } = {}) {
  const principals = new WeakMap<FastifyRequest, Principal>();
  return {
    onRequest: async (req: FastifyRequest): Promise<void> => {
      const principal = await authenticate(req, verifier, failures);
      if (opts.writes === true && principal.readOnly) throw apiErrors.forbidden(opts.readOnlyMessage);
      principals.set(req, principal);
    },
    principalOf: (req: FastifyRequest): Principal => {
      const principal = principals.get(req);
      if (principal === undefined) throw apiErrors.unauthorized();
      return principal;
    },
  };
}
