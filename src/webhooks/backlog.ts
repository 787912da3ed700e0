import type { ClaimedDelivery } from './outbox.js';

/**
 * First attempts this process enqueued but could not start (no slot free), remembered so that
 * its lane can claim them by id as slots free up instead of searching the outbox for them. The
 * rows stay unclaimed in the outbox meanwhile, so this is only a hint: another worker may take
 * them first (the claim by id then skips them), and rows beyond the cap are simply left to the
 * claim query. Per URL in arrival order; URLs taken in turn.
 */

const MAX_ROWS = 50_000;

export class Backlog {
  readonly #byUrl = new Map<string, { rows: ClaimedDelivery[]; head: number }>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  has(url: string): boolean {
    return this.#byUrl.has(url);
  }

  /** Remembers rows; returns how many did not fit. */
  add(rows: readonly ClaimedDelivery[]): number {
    let left = 0;
    for (const row of rows) {
      if (this.#size >= MAX_ROWS) {
        left += 1;
        continue;
      }
      const url = String(row.urlId);
      let q = this.#byUrl.get(url);
      if (q === undefined) this.#byUrl.set(url, (q = { rows: [], head: 0 }));
      q.rows.push(row);
      this.#size += 1;
    }
    return left;
  }

  /** How many rows `take` would give now. */
  available(limit: number, room: (url: string) => number): number {
    let n = 0;
    for (const [url, q] of this.#byUrl) {
      n += Math.min(room(url), q.rows.length - q.head);
      if (n >= limit) return limit;
    }
    return n;
  }

  /** Takes (forgets) up to `limit` rows, at most `room(url)` of each URL; the URLs served go last. */
  take(limit: number, room: (url: string) => number): ClaimedDelivery[] {
    const out: ClaimedDelivery[] = [];
    const served: [string, { rows: ClaimedDelivery[]; head: number }][] = [];
    for (const [url, q] of this.#byUrl) {
      if (out.length >= limit) break;
      const n = Math.min(room(url), q.rows.length - q.head, limit - out.length);
      if (n <= 0) continue;
      for (let i = 0; i < n; i++) out.push(q.rows[q.head + i] as ClaimedDelivery);
      q.head += n;
      served.push([url, q]);
    }
    for (const [url, q] of served) {
      this.#byUrl.delete(url);
      if (q.head < q.rows.length) this.#byUrl.set(url, q.head > 1024 ? { rows: q.rows.slice(q.head), head: 0 } : q);
    }
    this.#size -= out.length;
    return out;
  }
}
