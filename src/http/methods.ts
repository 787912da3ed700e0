import type { FastifyInstance, FastifyRequest } from 'fastify';
import { apiErrors } from './errors.js';

/**
 * 405, with the methods it takes in `Allow`, for every other method the server knows (HEAD
 * comes with GET); a method the server does not know at all is a 501 (server.ts).
 */
export function refuseOtherMethods(scope: FastifyInstance, url: string, allowed: readonly string[]): void {
  const allow = allowed.includes('GET') && !allowed.includes('HEAD') ? [...allowed, 'HEAD'] : allowed;
  const others = scope.supportedMethods.filter((m) => !allow.includes(m));
  if (others.length === 0) return;
  const refuse = async (req: FastifyRequest): Promise<never> => {
    throw apiErrors.methodNotAllowed(req.method, allow);
  };
  // Refused after the scope's own hooks (under /v3/REST, authentication: 401 before 405) and
  // before any body is read: a body this resource would never take cannot turn the 405 into a 415.
  scope.route({ method: others, url, onRequest: refuse, handler: refuse });
}
