import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/transport-node';

export interface NatsOnlyResult {
  ms: number;
  received: number;
  /** Left unacknowledged according to the server once done (should be 0). */
  ackPending: number;
}

/**
 * The broker limit: a fresh durable pull consumer on the same stream, `consume()` + JSON.parse +
 * ack, no database, timed until `count` messages are acked and the server has seen the acks.
 */
export async function natsOnly(nc: NatsConnection, stream: string, subjectPrefix: string, count: number, name: string): Promise<NatsOnlyResult> {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(stream, {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: `${subjectPrefix}.>`,
    ack_wait: nanos(60_000),
    max_ack_pending: 20_000,
  });
  try {
    const consumer = await jetstream(nc).consumers.get(stream, name);
    const started = performance.now();
    const messages = await consumer.consume({ max_messages: 5000 });
    let received = 0;
    for await (const m of messages) {
      JSON.parse(m.string());
      m.ack();
      if (++received >= count) break;
    }
    await nc.flush();
    const ms = performance.now() - started;
    await messages.close();
    const info = await jsm.consumers.info(stream, name);
    return { ms, received, ackPending: info.num_ack_pending };
  } finally {
    await jsm.consumers.delete(stream, name);
  }
}
