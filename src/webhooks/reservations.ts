import type { FirstAttemptClaimer } from './enqueue.js';
import type { ClaimedDelivery } from './outbox.js';

/**
 * Where Version 1 first attempts go when this process has room for them (the first lane):
 * after the commit they are started at once where a slot is free or queued for one, straight
 * from the log (no outbox row). Events beyond that room get outbox rows, claimed as usual.
 */
export interface FirstAttempts {
  /** 'url full': the URL has no room here; its next finished request in this process claims again. */
  reserve(urlId: bigint): 'reserved' | 'queued' | 'url full' | 'lane full';
  unreserve(urlId: bigint, kind: 'reserved' | 'queued'): void;
  /** Rows of this URL were committed unclaimed because it was full. */
  markBehind(urlId: bigint): void;
  startReserved(row: ClaimedDelivery): void;
  /** `claimedAt`: the local clock before the slot was reserved. */
  enqueue(row: ClaimedDelivery, claimedAt: number): void;
  /** Resolves when there is room for more (or after `maxWaitMs`): the fan-out's pace. True if it had to wait. */
  room(maxWaitMs: number): Promise<boolean>;
  /** How many more first attempts could start or queue now. */
  capacity(): number;
}

/** One step's reservations: what to start or queue after the commit, give back after a failure, or leave waiting. */
export class Reservations implements FirstAttemptClaimer {
  readonly at = Date.now();
  /** What `reserve` gave, in the order of the rows claimed. */
  readonly reserved: { urlId: bigint; kind: 'reserved' | 'queued' }[] = [];
  /** Rows left unclaimed because their URL is at its cap here, and those URLs. */
  waiting = 0;
  readonly waitingUrls = new Set<bigint>();

  constructor(private readonly first: FirstAttempts) {}

  reserve(urlId: bigint): boolean {
    const outcome = this.first.reserve(urlId);
    if (outcome === 'url full') {
      this.waiting += 1;
      this.waitingUrls.add(urlId);
    }
    if (outcome !== 'reserved' && outcome !== 'queued') return false;
    this.reserved.push({ urlId, kind: outcome });
    return true;
  }

  /** After the commit: the direct first attempts start or queue, and the URLs left waiting claim again when a slot frees. */
  committed(claimed: readonly ClaimedDelivery[]): void {
    for (const urlId of this.waitingUrls) this.first.markBehind(urlId);
    claimed.forEach((row, i) => {
      if (this.reserved[i]?.kind === 'queued') this.first.enqueue(row, this.at);
      else this.first.startReserved(row);
    });
  }

  failed(): void {
    for (const r of this.reserved) this.first.unreserve(r.urlId, r.kind);
  }
}
