import { isIP } from 'node:net';
import { z } from 'zod';
import { allowListEntryProblem } from './webhooks/ssrf-guard.js';

/** The kinds of value settings take (config.ts): each parses an environment variable's text and words what is wrong with it. */

export const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

export const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a whole number' })
    .transform(Number)
    .pipe(z.number().int().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }));

export const url = (protocols: readonly string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}` },
  );

export const natsServers = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
  // An empty list would reach nats.js, which then connects to its own default (127.0.0.1:4222).
  .refine((list) => list.length > 0, { message: 'must name at least one server, e.g. nats://127.0.0.1:4222' })
  .refine((list) => list.every((s) => /^(nats|tls|wss?):\/\/[^\s]+$|^[\w.-]+(:\d+)?$/.test(s)), {
    message: 'must be a comma-separated list of nats://host:port (or host:port)',
  });

/** The longest delay one retry may wait: 30 days (a Retry-After may stretch it by an hour more). */
export const MAX_RETRY_DELAY_SECONDS = 30 * 86_400;

export const retrySchedule = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()))
  .refine((parts) => parts.length > 0 && parts.every((p) => /^\d+(\.\d+)?$/.test(p)), {
    message: 'must be comma-separated seconds, e.g. 5,30,120',
  })
  .transform((parts) => parts.map(Number))
  .refine((delays) => delays.every((d) => d <= MAX_RETRY_DELAY_SECONDS), {
    message: `must be comma-separated seconds of at most ${MAX_RETRY_DELAY_SECONDS} (30 days) each`,
  })
  .refine((delays) => delays.some((d) => d > 0), {
    message: 'must give some time to retry: its sum is how long a URL may fail before it turns dead',
  });

export const allowList = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
  .superRefine((entries, ctx) => {
    for (const e of entries) {
      const problem = allowListEntryProblem(e);
      if (problem !== null) ctx.addIssue({ code: 'custom', message: `must be comma-separated host names, IP addresses or CIDRs: ${problem}` });
    }
  });

/**
 * The proxies in front whose `X-Forwarded-For` names the client (fastify's `trustProxy`): unset
 * or `false`, none (the socket's peer is the client); else their addresses, CIDRs, or
 * `loopback` / `linklocal` / `uniquelocal`. Trusting every hop (`true`) or a hop count is not
 * offered: a client reaching the service directly could then name itself whatever it likes.
 */
export const trustProxy = z
  .string()
  .transform((v): false | string[] => (/^(false|0|no)$/.test(v.trim()) ? false : v.split(',').map((s) => s.trim())))
  .superRefine((proxies, ctx) => {
    for (const entry of proxies || []) {
      const problem = trustedProxyProblem(entry);
      if (problem !== null) ctx.addIssue({ code: 'custom', message: `must be false or the proxies' comma-separated addresses and CIDRs (or loopback, linklocal, uniquelocal): ${problem}` });
    }
  });

function trustedProxyProblem(entry: string): string | null {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return null;
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return `"${entry}" is not an IP address or CIDR`;
  if (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))) return `"${entry}" has an invalid prefix length`;
  return null;
}

export const natsToken = z.string().regex(/^[A-Za-z0-9_-]+$/, { message: 'may hold only letters, digits, _ and -' });
