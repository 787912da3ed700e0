import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import type { AttemptResult } from './outcome-writer.js';
import { isExhausted, retryWindowMs } from './retry-policy.js';

/**
 * What a batch of attempt results says of each callback URL, written in the outcome writer's
 * transaction: its last success, the start of its failure streak (`failing_since`), and whether
 * it dies. A URL dies when a retry of it fails and it has failed, with no success since, for the
 * retry schedule's whole window, however far its deliveries are in their retries; and when a
 * delivery out of retries finds no success of its URL since that delivery first failed (under a
 * backlog a URL's deliveries wait for its few slots, so the window is what kills it).
 */

/** A URL's last success in a batch, and the failure after it that starts its next streak. */
export interface UrlSuccess {
  id: string;
  at: string;
  failing_since: string | null;
}

/** A URL with failures and no success in a batch: the start of its streak. */
export interface UrlFailing {
  id: string;
  at: string;
}

/**
 * Per URL, from a batch's results in the order they came: its last success (when the answer
 * came) and the start of its first failed attempt after that (or of its first, with none).
 * Failures count only where the claim is still held (`counts`): a worker whose lease ran out
 * (frozen a while) may bring an old failure that says nothing of the URL now.
 */
export function healthOf(batch: readonly AttemptResult[], counts: (r: AttemptResult) => boolean): Map<string, { lastOk: Date | null; failingSince: Date | null }> {
  const health = new Map<string, { lastOk: Date | null; failingSince: Date | null }>();
  for (const r of batch) {
    if (!r.http.ok && !counts(r)) continue;
    const id = String(r.delivery.urlId);
    const h = health.get(id) ?? { lastOk: null, failingSince: null };
    health.set(id, h);
    if (r.http.ok) {
      const done = new Date(r.attemptedAt.getTime() + r.http.latencyMs);
      if (h.lastOk === null || done > h.lastOk) h.lastOk = done;
      h.failingSince = null;
    } else h.failingSince ??= r.attemptedAt;
  }
  return health;
}

/** The URLs this batch kills (`isHeld`: the results whose claim the writer still holds; only they decide). */
export async function killUrls(
  trx: Kysely<Database>,
  batch: readonly AttemptResult[],
  schedule: readonly number[],
  isHeld: (r: AttemptResult) => boolean,
  failing: readonly UrlFailing[],
): Promise<Set<string>> {
  // Out of retries: the URL dies if it has not worked since this delivery first failed.
  const killed = new Set<string>();
  for (const r of batch) {
    if (r.http.ok || !isHeld(r) || !isExhausted(schedule, r.delivery.attempts + 1)) continue;
    const since = r.delivery.firstFailedAt ?? r.attemptedAt;
    const k = await sql<{ id: bigint }>`
      UPDATE callback_urls SET status = 'dead', dead_since = now(), updated_at = now()
      WHERE id = ${r.delivery.urlId} AND status = 'alive' AND (last_success_at IS NULL OR last_success_at < ${since})
      RETURNING id`.execute(trx);
    if (k.rows.length > 0) killed.add(String(r.delivery.urlId));
  }
  // Failing, with no success, for the whole window: dead, whatever its deliveries' attempts.
  // Asked when a retry fails (a URL is never dead from one attempt, however long it took).
  const retried = new Set(batch.filter((r) => !r.http.ok && r.delivery.attempts > 0 && isHeld(r)).map((r) => String(r.delivery.urlId)));
  const overdue = failing.filter((f) => retried.has(f.id));
  if (overdue.length > 0) {
    const k = await sql<{ id: string }>`
      UPDATE callback_urls AS u SET status = 'dead', dead_since = now(), updated_at = now()
      FROM json_to_recordset(${JSON.stringify(overdue)}::json) AS x(id bigint, at timestamptz)
      WHERE u.id = x.id AND u.status = 'alive'
        AND coalesce(u.failing_since, x.at) <= now() - make_interval(secs => ${retryWindowMs(schedule) / 1000}::float8)
        AND (u.last_success_at IS NULL OR u.last_success_at < coalesce(u.failing_since, x.at))
      RETURNING u.id::text AS id`.execute(trx);
    for (const row of k.rows) killed.add(row.id);
  }
  return killed;
}

/** Writes the batch's successes and failure streaks to the URLs. */
export async function writeUrlHealth(trx: Kysely<Database>, healthy: readonly UrlSuccess[], failing: readonly UrlFailing[]): Promise<void> {
  if (healthy.length > 0) {
    // A success ends the URL's failure streak; a failure after it in this batch starts the next.
    await sql`UPDATE callback_urls AS u SET failing_since = x.failing_since, last_success_at = greatest(u.last_success_at, x.at)
      FROM json_to_recordset(${JSON.stringify(healthy)}::json) AS x(id bigint, at timestamptz, failing_since timestamptz) WHERE u.id = x.id`.execute(trx);
  }
  if (failing.length > 0) {
    await sql`UPDATE callback_urls AS u SET failing_since = x.at FROM json_to_recordset(${JSON.stringify(failing)}::json) AS x(id bigint, at timestamptz)
      WHERE u.id = x.id AND u.failing_since IS NULL`.execute(trx);
  }
}

/**
 * Past this many URLs remembered, `WrittenHealth` forgets them all (URLs deleted or gone quiet
 * would otherwise stay for good); forgetting only costs each URL's next success one more write.
 */
const MAX_REMEMBERED_URLS = 10_000;

/**
 * What the outcome writer last wrote of each URL's health, so a URL that keeps answering has
 * its success written at most every `successEveryMs`, while a success after a failure is
 * always written (it ends the URL's failure streak).
 */
export class WrittenHealth {
  /** Per URL: the last success time written, and whether a failure was written since. */
  readonly #successWritten = new Map<string, number>();
  readonly #failedSince = new Set<string>();

  constructor(
    private readonly successEveryMs: number,
    private readonly maxUrls = MAX_REMEMBERED_URLS,
  ) {}

  /** URLs remembered now. */
  get size(): number {
    return new Set([...this.#successWritten.keys(), ...this.#failedSince]).size;
  }

  /** Whether a batch's last success of a URL (and the failure after it, if any) must be written. */
  worthWriting(url: string, at: Date, failingSince: Date | null): boolean {
    return failingSince !== null || this.#failedSince.has(url) || at.getTime() - (this.#successWritten.get(url) ?? 0) >= this.successEveryMs;
  }

  /** After a commit: what it wrote. */
  wrote(healthy: readonly UrlSuccess[], failing: readonly UrlFailing[]): void {
    for (const h of healthy) {
      this.#successWritten.set(h.id, Date.parse(h.at));
      if (h.failing_since === null) this.#failedSince.delete(h.id);
      else this.#failedSince.add(h.id);
    }
    for (const f of failing) this.#failedSince.add(f.id);
    // Forgotten together: a URL in neither has its next success written (see worthWriting).
    if (this.#successWritten.size + this.#failedSince.size > this.maxUrls) {
      this.#successWritten.clear();
      this.#failedSince.clear();
    }
  }
}
