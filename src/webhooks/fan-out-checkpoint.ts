/** The fan-out's checkpoint and lease, which one dispatcher process at a time holds and moves. */

export const WEBHOOKS_CHECKPOINT = 'webhooks';
/** The lease of the one process that fans the log out into the outbox. */
export const FAN_OUT_LEASE = 'webhooks:fanout';

/** The fan-out is not where this process left it: another dispatcher moved its checkpoint or holds its lease. */
export class CheckpointMoved extends Error {
  constructor(what = 'the webhooks checkpoint was moved by another dispatcher') {
    super(what);
  }
}
