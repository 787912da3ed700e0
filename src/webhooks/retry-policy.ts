/**
 * When to try a failed delivery again. The schedule is data (WEBHOOK_RETRY_SCHEDULE, seconds
 * between attempts); each delay gets ±20 % jitter so a recovering endpoint is not hit by every
 * delivery at once. A `Retry-After` from the receiver is honoured within bounds: never sooner
 * than the schedule says, and never later than twice the scheduled delay or a minute, whichever
 * is longer, nor more than an hour past the schedule; so a receiver can neither shorten the
 * window (the dead-URL rule counts on its 24 h) nor push retries far past it. The delay it asks
 * for gets up to 20 % more (jitter upwards only, within those bounds), so the deliveries one
 * answer turned away do not all come back at the same instant.
 * The last scheduled retry comes no sooner than the whole window after the delivery first
 * failed: jitter moves the retries before it either way, but never shortens the window (a URL
 * whose last retry fails with no success since dies then, so the window is how long it had).
 * After the last scheduled retry fails the delivery is exhausted.
 */

/**
 * `delayMs`: from now; `notBeforeMs`: on the last scheduled retry, the whole window, which the
 * retry waits for counted from the delivery's first failure (the outbox takes the later of the
 * two in the database's clock, the one its claims and the dead-URL rule read); else null.
 */
export type RetryDecision = { readonly kind: 'retry'; readonly delayMs: number; readonly notBeforeMs: number | null } | { readonly kind: 'exhausted' };

const JITTER = 0.2;
const RETRY_AFTER_FLOOR_MS = 60_000;
const RETRY_AFTER_MAX_EXTRA_MS = 3_600_000;

/** `attempts`: attempts made so far, the failed one included. */
export function nextRetry(scheduleSeconds: readonly number[], attempts: number, retryAfterMs: number | null, random: () => number = Math.random): RetryDecision {
  const seconds = scheduleSeconds[attempts - 1];
  if (seconds === undefined) return { kind: 'exhausted' };
  const base = seconds * 1000;
  let delayMs: number;
  if (retryAfterMs !== null) {
    const upper = Math.min(base + RETRY_AFTER_MAX_EXTRA_MS, Math.max(2 * base, RETRY_AFTER_FLOOR_MS));
    delayMs = Math.round(Math.min(upper, Math.max(base, retryAfterMs) * (1 + JITTER * random())));
  } else delayMs = Math.round(base * (1 - JITTER + 2 * JITTER * random()));
  return { kind: 'retry', delayMs, notBeforeMs: attempts === scheduleSeconds.length ? retryWindowMs(scheduleSeconds) : null };
}

/** Has a delivery that made `attempts` attempts, all failed, used every scheduled retry? */
export function isExhausted(scheduleSeconds: readonly number[], attempts: number): boolean {
  return attempts > scheduleSeconds.length;
}

/** The whole window: how long after its first failure a delivery is given up (jitter aside). */
export function retryWindowMs(scheduleSeconds: readonly number[]): number {
  return scheduleSeconds.reduce((sum, s) => sum + s * 1000, 0);
}

/**
 * `Retry-After` as delay-seconds or an HTTP date in any of its three formats (IMF-fixdate
 * `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`, asctime
 * `Sun Nov  6 08:49:37 1994`, which names no zone: HTTP dates are GMT) → milliseconds from
 * `now`; null if absent or unreadable.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number = Date.now()): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return null;
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  if (!/^[A-Za-z]{3,9},? /.test(text)) return null;
  const at = Date.parse(/\b(GMT|UTC)$/i.test(text) ? text : `${text} GMT`);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
