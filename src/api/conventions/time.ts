/** Dates on the wire: RFC 3339 with `Z`, and `""` for none (Mailjet's convention). */
export function rfc3339(unixSeconds: bigint | number | string | null | undefined): string {
  if (unixSeconds === null || unixSeconds === undefined || unixSeconds === '') return '';
  const ms = Number(unixSeconds) * 1000;
  if (!Number.isFinite(ms)) return '';
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// The zone may also be ` hh:mm`: a `+hh:mm` sent unencoded in a query string arrives so.
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2}| \d{2}:\d{2})?$/i;
const MAX_SECONDS = 253_402_300_799; // 9999-12-31T23:59:59Z

/**
 * A timestamp as clients send it → Unix seconds: epoch seconds, RFC 3339, or a zone-less ISO
 * date-time taken as UTC. `null` when the text is none of these.
 */
export function parseTimestamp(text: string): number | null {
  const t = text.trim();
  if (/^\d{1,12}$/.test(t)) {
    const n = Number(t);
    return n <= MAX_SECONDS ? n : null;
  }
  const m = ISO.exec(t);
  if (m === null) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', zone] = m;
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
  return Math.floor(ms / 1000);
}
