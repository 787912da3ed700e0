/** Dates on the wire: RFC 3339 with `Z`, and `""` for none (Mailjet's convention). */
export function rfc3339(unixSeconds: bigint | number | string | null | undefined): string {
  if (unixSeconds === null || unixSeconds === undefined || unixSeconds === '') return '';
  const ms = Number(unixSeconds) * 1000;
  if (!Number.isFinite(ms)) return '';
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// The zone may also be ` hh:mm`: a `+hh:mm` sent unencoded in a query string arrives so.
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?(Z|[+-]\d{2}:?\d{2}| \d{2}:\d{2})?$/i;
const MAX_SECONDS = 253_402_300_799; // 9999-12-31T23:59:59Z

/** A time as a client wrote it: its whole Unix seconds and the fraction of a second after them. */
export interface Instant {
  readonly seconds: number;
  /** In [0, 1). */
  readonly fraction: number;
}

/**
 * A timestamp as clients send it: epoch seconds, RFC 3339, or a zone-less ISO date-time taken
 * as UTC. `null` when the text is none of these, names a day that does not exist, or is past
 * 9999.
 */
export function parseInstant(text: string): Instant | null {
  const t = text.trim();
  if (/^\d{1,12}$/.test(t)) {
    const n = Number(t);
    return n <= MAX_SECONDS ? { seconds: n, fraction: 0 } : null;
  }
  const m = ISO.exec(t);
  if (m === null) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', part = '', zone] = m;
  let offset = 'Z';
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const signed = zone.startsWith(' ') ? `+${zone.slice(1)}` : zone;
    offset = signed.length === 5 ? `${signed.slice(0, 3)}:${signed.slice(3)}` : signed;
  }
  const ms = Date.parse(`${y}-${mo}-${d}T${h}:${mi}:${s}${offset}`);
  if (Number.isNaN(ms)) return null;
  // Date.parse rolls 2024-02-31 over into March: refuse dates that do not exist.
  const check = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  if (check.getUTCMonth() !== Number(mo) - 1 || check.getUTCDate() !== Number(d)) return null;
  const seconds = ms / 1000;
  return seconds <= MAX_SECONDS ? { seconds, fraction: Number(`0.${part}`) } : null;
}

/**
 * A timestamp as clients send it → whole Unix seconds (see parseInstant).
 *
 * Event times are whole seconds, so a fraction of a second is rounded the way that keeps the
 * comparison it feeds exact: `up` for `>=` and `<` bounds (a time at or after 10.5 is one at or
 * after 11, a time before 10.5 one before 11), `down` for `>` and `=` (after 10.5 is after 10;
 * "at" 10.5 is within second 10).
 */
export function parseTimestamp(text: string, fraction: 'up' | 'down' = 'down'): number | null {
  const at = parseInstant(text);
  if (at === null) return null;
  const seconds = at.seconds + (fraction === 'up' && at.fraction > 0 ? 1 : 0);
  return seconds <= MAX_SECONDS ? seconds : null;
}
