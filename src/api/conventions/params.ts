import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { parseTimestamp } from './time.js';

/**
 * Query parameters as Mailjet's clients send them. Every resource declares its parameters as a
 * zod object keyed by the canonical (PascalCase) names; `parseQuery` matches the names sent
 * without regard to case (and to a `[]` suffix), validates, and answers a 400 naming the
 * parameter. Unknown parameters are ignored, as Mailjet does. The same schemas feed OpenAPI.
 */

const MAX_UINT64 = 2n ** 64n - 1n;
const MAX_INT64 = 2n ** 63n - 1n;

/**
 * A 64-bit id → bigint: unsigned by default (message ids, kept as numeric); `signed` for ids kept
 * in int8 columns (campaign, contact, list, sender), which a larger value would overflow.
 */
export const int64 = (opts: { signed?: boolean } = {}) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, { message: 'must be a non-negative whole number' })
    // Past 20 significant digits it is out of range whatever they are (and is not parsed).
    .transform((v) => (v.replace(/^0+/, '').length > 20 ? MAX_UINT64 + 1n : BigInt(v)))
    .refine((v) => v <= (opts.signed === true ? MAX_INT64 : MAX_UINT64), { message: opts.signed === true ? 'is beyond the signed 64-bit range' : 'is beyond the 64-bit range' })
    .meta({ type: 'integer', format: 'int64' });

export const int = (min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d{1,16}$/, { message: 'must be a whole number' })
    .transform(Number)
    .pipe(z.number().int().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }));

/** true / false / 1 / 0, any case. */
export const bool = () =>
  z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(['true', 'false', '1', '0'], { message: 'must be true, false, 1 or 0' }))
    .transform((v) => v === 'true' || v === '1');

/**
 * How a time parameter compares with the (whole-second) times it filters: `atOrAfter` (>=),
 * `before` (<), `after` (>), `at` (=). It decides how a fraction of a second is rounded
 * (parseTimestamp), so that `EventToTs=…:20.5Z` keeps a click at :20.
 */
export type TimeBound = 'atOrAfter' | 'before' | 'after' | 'at';

/** Unix seconds, RFC 3339, or a zone-less ISO date-time (UTC) → Unix seconds. */
export const timestamp = (bound: TimeBound) =>
  z
    .string()
    .transform((v, ctx) => {
      const seconds = parseTimestamp(v, bound === 'atOrAfter' || bound === 'before' ? 'up' : 'down');
      if (seconds === null) {
        ctx.addIssue({ code: 'custom', message: 'must be Unix seconds or an RFC 3339 date-time such as 2024-05-01T00:00:00Z' });
        return z.NEVER;
      }
      return seconds;
    })
    .meta({ description: 'Unix seconds, RFC 3339, or ISO date-time without zone (UTC)' });

/** One of fixed words, any case → the canonical spelling. */
export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z
    .string()
    .trim()
    .transform((v, ctx) => {
      const hit = values.find((w) => w.toLowerCase() === v.toLowerCase());
      if (hit === undefined) {
        ctx.addIssue({ code: 'custom', message: `must be one of ${values.join(', ')}` });
        return z.NEVER;
      }
      return hit as T[number];
    })
    .meta({ enum: [...values] });

export const text = (max = 1000) =>
  z
    .string()
    .max(max, { message: `must be at most ${max} characters` })
    // Postgres text cannot hold NUL: refuse it here rather than fail in the query.
    .refine((v) => !v.includes('\u0000'), { message: 'must not contain NUL characters' });

/** Whether `zone` is one of UTC's IANA names (`UTC`, `Etc/UTC`, `GMT`, `Zulu`, … in any case). */
function namesUtc(zone: string): boolean {
  try {
    return new Intl.DateTimeFormat('en', { timeZone: zone }).resolvedOptions().timeZone === 'UTC';
  } catch {
    return false;
  }
}

/** A time zone parameter where times are served in UTC only: UTC by any of its names, or a 400. */
export const utcOnly = () =>
  z.string().refine(namesUtc, { message: 'times are served in UTC only: give UTC (or Etc/UTC, GMT) or leave it out' });

/** A comma-separated list (also sent as repeated `Name[]=` parameters). */
export const list = <T extends z.ZodType<unknown, string>>(item: T, maxItems = 100) =>
  z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
    .pipe(z.array(item).min(1, { message: 'must list at least one value' }).max(maxItems, { message: `must list at most ${maxItems} values` }))
    .meta({ description: 'comma-separated list' });

type Shape = Record<string, z.ZodType<unknown, string | undefined>>;

const canonicalNames = new WeakMap<z.ZodObject, Map<string, string>>();

function namesOf(schema: z.ZodObject): Map<string, string> {
  let names = canonicalNames.get(schema);
  if (names === undefined) {
    names = new Map(Object.keys(schema.shape).map((k) => [k.toLowerCase(), k]));
    canonicalNames.set(schema, names);
  }
  return names;
}

export type RawQuery = Record<string, string | string[] | undefined>;

/** A parameter's name without the `[]` that array-style clients (node-mailjet) append. */
export const bareName = (sent: string): string => (sent.endsWith('[]') ? sent.slice(0, -2) : sent);

export function parseQuery<S extends z.ZodObject<Shape>>(schema: S, raw: RawQuery, aliases: Readonly<Record<string, string>> = {}): z.output<S> {
  const names = namesOf(schema);
  const input: Record<string, string> = {};
  /** Canonical name → the name the client sent first for it (an alias, another case), for errors. */
  const sentAs: Record<string, string> = {};
  const times: Record<string, number> = {};
  for (const [sent, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    const bare = bareName(sent);
    const lower = bare.toLowerCase();
    const name = names.get(aliases[lower] ?? lower);
    if (name === undefined) continue;
    const joined = Array.isArray(value) ? value.join(',') : value;
    input[name] = name in input ? `${input[name] as string},${joined}` : joined;
    sentAs[name] ??= bare;
    times[name] = (times[name] ?? 0) + (Array.isArray(value) ? value.length : 1);
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = String(issue?.path[0] ?? 'query');
  const message = issue?.code === 'invalid_type' ? 'must be given once, as text' : (issue?.message ?? 'is invalid');
  // A parameter given several times is read as its values joined by commas (a list's way).
  const repeated = (times[param] ?? 1) > 1 ? `; it was given ${times[param]} times, its values joined by commas` : '';
  throw apiErrors.badRequest(`Invalid parameter ${sentAs[param] ?? param}: ${message} (got ${JSON.stringify(input[param] ?? '')}${repeated})`);
}
