import { type JetStreamClient, type JetStreamManager, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';

/** A producer's view of NATS JetStream for end-to-end tests. */
export interface JetStreamHandle {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  close(): Promise<void>;
}

export async function openJetStream(url: string): Promise<JetStreamHandle> {
  const nc = await connect({ servers: [url], name: 'mailtally-e2e' });
  return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc), close: () => nc.drain() };
}

/** The stream as a producer would create it before the service first runs. */
export async function createStream(h: JetStreamHandle, name: string, subjectPrefix: string): Promise<void> {
  await h.jsm.streams.add({ name, subjects: [`${subjectPrefix}.>`], storage: StorageType.File });
}

export interface OutgoingMessage {
  subject: string;
  body: string;
  /** Nats-Msg-Id header; absent = no header, so the stream keeps every copy. */
  msgId?: string;
}

/** Publishes with up to `window` acks outstanding; returns how many the stream stored as new. */
export async function publishAll(h: JetStreamHandle, messages: Iterable<OutgoingMessage>, window = 512): Promise<number> {
  const inFlight = new Set<Promise<void>>();
  let stored = 0;
  for (const m of messages) {
    while (inFlight.size >= window) await Promise.race(inFlight);
    const job = h.js
      .publish(m.subject, m.body, m.msgId !== undefined ? { msgID: m.msgId } : {})
      .then((ack) => {
        if (!ack.duplicate) stored++;
      })
      .finally(() => inFlight.delete(job));
    inFlight.add(job);
  }
  await Promise.all(inFlight);
  return stored;
}

export async function deleteStreamQuietly(url: string, name: string): Promise<void> {
  let h: JetStreamHandle | null = null;
  try {
    h = await openJetStream(url);
    await h.jsm.streams.delete(name);
  } catch {
    // missing already, or NATS gone: nothing to clean
  } finally {
    await h?.close().catch(() => {});
  }
}
