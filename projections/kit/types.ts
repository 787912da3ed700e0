import type { EventType } from '../../src/events/schema.js';

/**
 * What a projection sees of one log row: the typed columns, with "none" as '' / '0' rather
 * than null, so values can be used as keys as they are. Ids stay decimal strings (64-bit).
 */
export interface LogEvent {
  readonly position: bigint;
  readonly eventId: string;
  readonly type: EventType;
  /** Unix seconds. */
  readonly time: number;
  readonly apiKeyId: string;
  /** '' for campaign events. */
  readonly messageId: string;
  readonly campaignId: string;
  readonly contactId: string;
  readonly listId: string;
  readonly senderId: string;
  readonly email: string;
  readonly recipientDomain: string;
  readonly esp: string;
  readonly sender: string;
  readonly senderDomain: string;
  readonly customCampaign: string;
  readonly url: string;
  readonly uaPlatform: string;
  readonly uaClient: string;
  /** The raw user-agent string (opens only: /openinformation shows the first open's). */
  readonly agent: string;
  readonly geo: string;
  readonly hardBounce: boolean;
  readonly blocked: boolean;
  readonly errorRelatedTo: string;
  readonly error: string;
  readonly stateId: number | null;
  /** The raw payload, for campaign events only (their metadata fields live there). */
  readonly campaignPayload: Readonly<Record<string, unknown>> | null;
}

/**
 * The unit a projection folds: every event of one message (or, for campaign metadata, every
 * `campaign` event of one campaign), sorted by (time, eventId). A projection's rows are a pure
 * function of this set, so the projector can retract a group's old contribution and add its new
 * one whenever the group gains an event, in whatever order events arrive.
 */
export interface Group {
  readonly kind: 'message' | 'campaign';
  readonly apiKeyId: string;
  /** The message id, or the campaign id for campaign groups. */
  readonly id: string;
  readonly events: readonly LogEvent[];
}

export type ColumnType = 'bigint' | 'integer' | 'text' | 'boolean' | 'numeric';

export interface ColumnSpec {
  readonly name: string;
  readonly type: ColumnType;
  /** Key columns are never null: use '' / 0 for "none". */
  readonly nullable?: boolean;
}

/** A value as emitted: ids as decimal strings, counts and times as numbers. */
export type Value = string | number | boolean | null;

/**
 * Percent of each table page that inserts fill (Postgres's `fillfactor`, 100 when unset). A
 * table whose rows every later event of a message rewrites leaves room on each page, so the
 * update can stay on the row's page without touching any index (a HOT update), provided the
 * columns it changes are in no index: such a table keeps its often-changing columns out of
 * `indexes` (see `messages.ts`).
 */
export type Fillfactor = 70 | 80 | 90 | 100;

/**
 * `counters`: rows keyed by `keys`, every group adds to `sums` (retracting what it added
 * before); `maxes` / `mins` only ever move one way because a group's event set only grows.
 * A row whose sums all return to zero is deleted.
 * `rows`: each row belongs to one group (its key says which); a group's rows are replaced when
 * its contribution changes.
 */
export type TableSpec =
  | {
      readonly kind: 'counters';
      readonly name: string;
      readonly keys: readonly ColumnSpec[];
      readonly sums: readonly ColumnSpec[];
      readonly maxes?: readonly ColumnSpec[];
      readonly mins?: readonly ColumnSpec[];
      readonly indexes?: readonly (readonly string[])[];
      /** See {@link Fillfactor}. */
      readonly fillfactor?: Fillfactor;
    }
  | {
      readonly kind: 'rows';
      readonly name: string;
      readonly keys: readonly ColumnSpec[];
      readonly columns: readonly ColumnSpec[];
      readonly indexes?: readonly (readonly string[])[];
      /** See {@link Fillfactor}. */
      readonly fillfactor?: Fillfactor;
    };

/**
 * Where a projection puts a group's contribution. Arrays follow the table spec's column order;
 * the projector may keep them as they are, so a projection does not change an array after
 * passing it (passing the same one for several rows is fine). For one group, a projection
 * emits each key of a table at most once, and the same keys in the same order when the group
 * has gained events that change none of them: the live projector compares a group's rows
 * before and after a batch by position while they agree (`src/projector/group-diff.ts`; a
 * unit test holds every projection to the first rule, and the second only saves work).
 */
export interface Output {
  /** Counter tables: add `sums` (and offer `maxes` / `mins`) under `keys`. */
  add(table: string, keys: readonly Value[], sums: readonly number[], maxes?: readonly Value[], mins?: readonly Value[]): void;
  /** Row tables: one row (keys then columns). */
  row(table: string, keys: readonly Value[], columns: readonly Value[]): void;
}

export interface Projection {
  readonly name: string;
  /** Bump when the fold or the tables change: the projector rebuilds the read model. */
  readonly version: number;
  readonly tables: readonly TableSpec[];
  /** Which groups it reads; most read messages only. */
  readonly groups: readonly Group['kind'][];
  project(group: Group, out: Output): void;
  /**
   * The same numbers set-based, for rebuilds: per table, a SELECT over the rebuild's `log`,
   * `facts` and `engagement` relations (see `kit/sql.ts`). A rebuild folds the projections that have none.
   */
  readonly sql?: Readonly<Record<string, string>>;
}
