import { AckPolicy, DeliverPolicy, type JetStreamManager, JetStreamApiError, RetentionPolicy, StorageType, type StreamInfo } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';

export interface StreamSettings {
  stream: string;
  subjectPrefix: string;
}

export interface ConsumerSettings extends StreamSettings {
  consumer: string;
  ackWaitMs: number;
  maxAckPending: number;
}

const STREAM_NOT_FOUND = 10059;
const CONSUMER_NOT_FOUND = 10014;

/**
 * How long JetStream remembers a `Nats-Msg-Id`: the least it takes (100 ms). Its dedupe is
 * stream-wide, while EventIDs are unique per tenant only, so two tenants' events that share an
 * EventID and are published that close together with it as their `Nats-Msg-Id` (as the
 * contract suggests) keep only the first: a 2-minute window lost the second of any such pair
 * published within 2 minutes, with no trace. Postgres's unique index on (tenant, EventID)
 * dedupes exactly in any case; the window only spares it a producer's immediate resend.
 */
export const DUPLICATE_WINDOW_MS = 100;

/** The stream as ingest found it. */
export interface StreamFacts {
  /** Its Nats-Msg-Id window. */
  duplicateWindowMs: number;
  /** The shared consumer's settings before this process changed them to its own (another ingest process's, or an earlier run's), if it did. */
  consumerWas?: { ackWaitMs: number; maxAckPending: number };
}

const factsOf = (info: StreamInfo): StreamFacts => ({ duplicateWindowMs: info.config.duplicate_window / 1e6 });

/**
 * Creates the stream when it is missing. It keeps a week of events (Postgres is the source of
 * truth; the stream is the buffer that lets ingest fall behind, or Postgres be down, without
 * losing anything) and dedupes by Nats-Msg-Id for DUPLICATE_WINDOW_MS.
 */
export async function ensureStream(jsm: JetStreamManager, s: StreamSettings): Promise<StreamFacts> {
  const subjects = [`${s.subjectPrefix}.>`];
  try {
    return factsOf(await jsm.streams.info(s.stream));
  } catch (err) {
    if (!(err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND)) throw err;
    try {
      await jsm.streams.add({
        name: s.stream,
        subjects,
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        max_age: nanos(7 * 24 * 3600 * 1000),
        duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      });
      return { duplicateWindowMs: DUPLICATE_WINDOW_MS };
    } catch (addErr) {
      if (!(addErr instanceof JetStreamApiError)) throw addErr;
      // Another process may have created it first; if not, the server's refusal is the reason
      // (subjects another stream already takes, a limit of the account…).
      try {
        return factsOf(await jsm.streams.info(s.stream));
      } catch {
        throw new Error(
          `Could not create the NATS stream ${s.stream} (NATS_STREAM) for subjects ${subjects.join(', ')} (NATS_SUBJECT_PREFIX): ${addErr.message}`,
          { cause: addErr },
        );
      }
    }
  }
}

/** The stream, and the durable ingest consumer that every ingest process shares. */
export async function ensureStreamAndConsumer(jsm: JetStreamManager, s: ConsumerSettings): Promise<StreamFacts> {
  const stream = await ensureStream(jsm, s);
  const config = {
    durable_name: s.consumer,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: `${s.subjectPrefix}.>`,
    ack_wait: nanos(s.ackWaitMs),
    max_ack_pending: s.maxAckPending,
    max_deliver: -1,
  };
  try {
    const info = await jsm.consumers.info(s.stream, s.consumer);
    if (info.config.ack_wait !== config.ack_wait || info.config.max_ack_pending !== config.max_ack_pending) {
      await jsm.consumers.update(s.stream, s.consumer, { ack_wait: config.ack_wait, max_ack_pending: config.max_ack_pending });
      return { ...stream, consumerWas: { ackWaitMs: (info.config.ack_wait ?? 0) / 1e6, maxAckPending: info.config.max_ack_pending ?? -1 } };
    }
  } catch (err) {
    if (!(err instanceof JetStreamApiError && err.code === CONSUMER_NOT_FOUND)) throw err;
    try {
      await jsm.consumers.add(s.stream, config);
    } catch (addErr) {
      if (!(addErr instanceof JetStreamApiError)) throw addErr;
    }
  }
  return stream;
}
