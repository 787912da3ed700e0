import type { LogEvent } from '../../projections/kit/types.js';

/** A group as the live projector last folded it. */
export interface CachedGroup {
  /** Every event of the group up to the checkpoint, sorted by (time, EventID). */
  readonly events: readonly LogEvent[];
}

/**
 * What the live projector remembers of the groups it folded recently: their events, so that a
 * group gaining an event is not read from the log again (see `cached-batch.ts`). Only events
 * are kept, not what the projections made of them: that is many small objects per group, and
 * keeping them cost more in garbage collection than projecting the group again. Nor anything
 * tied to a cached events array by a weak map: it would live as long as the array does (the
 * facts once did; `messageFacts` now memoizes on the group object, which each batch makes anew).
 *
 * Entries are only ever committed state: a batch's groups are put in after its write commits,
 * and the runner clears the cache whenever it cannot vouch for it (a failed write, a lease won
 * or lost, projections at different checkpoints). A clear can come while a batch is being read
 * (the lease timer runs beside the batch loop): a batch takes the entries it uses before it
 * reads anything more (`cached-batch.ts`). The least recently folded groups go past
 * `maxGroups`; a group of more than `maxEvents` events is not kept (it is read when it comes
 * back). `maxGroups` 0 turns the cache off.
 */
export class GroupCache {
  readonly #groups = new Map<string, CachedGroup>();
  /** Bumped by every `clear`: a batch computed before a clear must not put its groups in after it. */
  generation = 0;
  hits = 0;
  misses = 0;

  constructor(
    readonly maxGroups: number,
    readonly maxEvents = 256,
  ) {}

  get size(): number {
    return this.#groups.size;
  }

  get(key: string): CachedGroup | undefined {
    const g = this.#groups.get(key);
    if (g === undefined) this.misses += 1;
    else this.hits += 1;
    return g;
  }

  has(key: string): boolean {
    return this.#groups.has(key);
  }

  /** Puts a committed batch's groups in, as the most recent. */
  putAll(entries: ReadonlyMap<string, CachedGroup>): void {
    if (this.maxGroups === 0) return;
    for (const [key, g] of entries) {
      this.#groups.delete(key);
      if (g.events.length <= this.maxEvents) this.#groups.set(key, g);
    }
    let excess = this.#groups.size - this.maxGroups;
    if (excess <= 0) return;
    for (const key of this.#groups.keys()) {
      this.#groups.delete(key);
      if (--excess === 0) break;
    }
  }

  clear(): void {
    this.generation += 1;
    this.#groups.clear();
  }
}
