import type { FastifyRequest } from 'fastify';
import type { KeyVerifier, Principal } from '../keys/key-store.js';
import { apiErrors } from './errors.js';

/** HTTP Basic (API key as user, secret key as password) → the tenant, or a 401. */
export async function authenticate(req: FastifyRequest, verifier: KeyVerifier): Promise<Principal> {
  const header = req.headers.authorization;
  const match = header !== undefined ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (match === null) throw apiErrors.unauthorized();
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw apiErrors.unauthorized();
  const principal = await verifier.verify(decoded.slice(0, colon), decoded.slice(colon + 1));
  if (principal === null) throw apiErrors.unauthorized();
  return principal;
}
