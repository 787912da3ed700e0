import { type ConnectionOptions, type NatsConnection, connect } from '@nats-io/transport-node';
import { withoutPassword } from '../config.js';

/** Connects to NATS; a failure names NATS_URL and the servers tried (passwords left out). */
export async function connectNats(options: ConnectionOptions & { servers: string[] }): Promise<NatsConnection> {
  try {
    return await connect(options);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`NATS_URL: cannot connect to ${options.servers.map(withoutPassword).join(', ')}: ${reason}`, { cause: err });
  }
}
