import type { ClaimedDelivery } from './outbox.js';

/**
 * The claim loop's "behind" marks: URLs that may have due rows left unclaimed because they were
 * at their cap here, each with the mark of when that was last seen: a request of theirs that
 * finishes claims again.
 */
export class BehindMarks {
  readonly #behind = new Map<string, number>();
  #mark = 0;

  constructor(private readonly perUrl: number) {}

  /** The marks as they are before a claim. */
  snapshot(): Map<string, number> {
    return new Map(this.#behind);
  }

  /** Rows of this URL were left unclaimed at its cap. */
  mark(url: string): void {
    this.#behind.set(url, ++this.#mark);
  }

  has(url: string): boolean {
    return this.#behind.has(url);
  }

  /**
   * After a claim: a URL given all the rows it had room for may have more; and after a full
   * sweep (`marks` given), a URL given fewer has none left, unless marked again meanwhile.
   */
  note(rows: readonly ClaimedDelivery[], room: ReadonlyMap<string, number>, marks: ReadonlyMap<string, number> | null): void {
    const got = new Map<string, number>();
    for (const r of rows) got.set(String(r.urlId), (got.get(String(r.urlId)) ?? 0) + 1);
    for (const [url, n] of got) if (n >= (room.get(url) ?? this.perUrl)) this.#behind.set(url, ++this.#mark);
    if (marks === null) return;
    for (const [url, mark] of marks) {
      if (this.#behind.get(url) === mark && (got.get(url) ?? 0) < (room.get(url) ?? this.perUrl)) this.#behind.delete(url);
    }
  }
}
