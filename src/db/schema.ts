import type { ColumnType, Insertable, Selectable } from 'kysely';

/**
 * The kysely view of the database. int8 columns come back as `bigint` on both drivers
 * (see connect.ts); numeric(20,0) message ids come back as decimal strings.
 */

type Int8 = ColumnType<bigint, bigint | number | string, bigint | number | string>;
type GeneratedInt8 = ColumnType<bigint, never, never>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** A timestamp the database fills in (DEFAULT now()). */
type DefaultTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface EventsTable {
  position: GeneratedInt8;
  event_id: string;
  api_key_id: Int8;
  type: string;
  /** Unix seconds, as sent by the producer. */
  event_time: Int8;
  /** numeric(20,0): the 64-bit unsigned MessageID as a decimal string; null for campaign events. */
  message_id: string | null;
  email: string | null;
  recipient_domain: string | null;
  esp: string | null;
  campaign_id: Int8;
  contact_id: Int8;
  list_id: Int8;
  sender_id: Int8;
  sender: string | null;
  sender_domain: string | null;
  custom_campaign: string | null;
  url: string | null;
  ua_platform: string | null;
  ua_client: string | null;
  geo: string | null;
  hard_bounce: boolean | null;
  blocked: boolean | null;
  error_related_to: string | null;
  error: string | null;
  state_id: number | null;
  nats_seq: Int8 | null;
  recorded_at: DefaultTimestamp;
  /** The event exactly as received (jsonb keeps 64-bit numbers exact). */
  payload: ColumnType<unknown, string, never>;
}

export interface DeadLettersTable {
  id: GeneratedInt8;
  received_at: DefaultTimestamp;
  source: 'nats' | 'http' | 'import';
  subject: string | null;
  api_key_id: Int8 | null;
  nats_seq: Int8 | null;
  message_key: string | null;
  reason: string;
  raw: Buffer;
}

export interface CheckpointsTable {
  name: string;
  position: Int8;
  updated_at: DefaultTimestamp;
  /** A projection's: the version of the code its read models were built by (migration 0006). */
  version: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface LeasesTable {
  name: string;
  owner: string;
  expires_at: Timestamp;
  acquired_at: DefaultTimestamp;
}

export interface ApiKeysTable {
  api_key_id: GeneratedInt8;
  public_key: string;
  secret_hash: string;
  read_only: boolean;
  created_at: DefaultTimestamp;
  revoked_at: Timestamp | null;
}

export interface ProjectionsTable {
  name: string;
  version: number;
  built_at: DefaultTimestamp;
}

export interface CallbackUrlsTable {
  id: GeneratedInt8;
  api_key_id: Int8;
  event_type: string;
  is_backup: ColumnType<boolean, boolean | undefined, boolean>;
  status: ColumnType<'alive' | 'dead', 'alive' | 'dead' | undefined, 'alive' | 'dead'>;
  url: string;
  version: ColumnType<number, number | undefined, number>;
  /** Standard Webhooks signing secret (`whsec_…`), shown to the tenant once. */
  secret: string;
  failing_since: Timestamp | null;
  last_success_at: Timestamp | null;
  dead_since: Timestamp | null;
  /** When its version, status, event type or backup flag last changed (a trigger, migration 0009): where its events go changed then. */
  route_changed_at: ColumnType<Date | null, never, never>;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
}

/** The delivery outbox (see the 0003 migration). */
export interface WebhookDeliveriesTable {
  id: GeneratedInt8;
  api_key_id: Int8;
  url_id: Int8;
  webhook_id: string;
  events: string[];
  positions: ColumnType<string[], (string | bigint)[], (string | bigint)[]>;
  bytes: number;
  retry: ColumnType<boolean, boolean | undefined, boolean>;
  attempts: ColumnType<number, number | undefined, number>;
  due_at: DefaultTimestamp;
  claim: string | null;
  claimed_until: Timestamp | null;
  first_failed_at: Timestamp | null;
  created_at: DefaultTimestamp;
}

export type AttemptOutcome = 'delivered' | 'failed' | 'expired' | 'dropped';

export interface WebhookAttemptsTable {
  id: GeneratedInt8;
  attempted_at: Timestamp;
  api_key_id: Int8;
  url_id: Int8;
  delivery_id: Int8;
  webhook_id: string;
  attempt: number;
  event_count: number;
  outcome: AttemptOutcome;
  status_code: number | null;
  latency_ms: number;
  error_class: string | null;
  response_snippet: string | null;
  /** A Version 2 batch's event positions (migration 0010); null for Version 1. */
  positions: ColumnType<string[] | null, string[] | null | undefined, never>;
}

export interface Database {
  events: EventsTable;
  dead_letters: DeadLettersTable;
  checkpoints: CheckpointsTable;
  leases: LeasesTable;
  api_keys: ApiKeysTable;
  projections: ProjectionsTable;
  callback_urls: CallbackUrlsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
}

export type EventRow = Selectable<EventsTable>;
export type NewDeadLetter = Insertable<DeadLettersTable>;
export type CallbackUrlRow = Selectable<CallbackUrlsTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
