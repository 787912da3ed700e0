import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { listDeadLetters } from '../log/dead-letters.js';

/** `mailtally dead-letters`: the most recent rejected inputs, one JSON object per line. */
export async function runDeadLetters(config: Config, limit: number): Promise<number> {
  const db = await connectDb(config.database, { application: 'mailtally:dead-letters' });
  try {
    await migrateToLatest(db.kysely);
    const rows = await listDeadLetters(db.kysely, { limit, newestFirst: true });
    const utf8 = new TextDecoder('utf-8', { fatal: true });
    for (const r of rows.reverse()) {
      let raw: string;
      let encoding: 'utf8' | 'base64' = 'utf8';
      try {
        raw = utf8.decode(r.raw);
      } catch {
        raw = r.raw.toString('base64');
        encoding = 'base64';
      }
      console.log(
        JSON.stringify({
          id: r.id.toString(),
          receivedAt: r.received_at.toISOString(),
          source: r.source,
          subject: r.subject,
          natsSeq: r.nats_seq?.toString() ?? null,
          apiKeyId: r.api_key_id?.toString() ?? null,
          reason: r.reason,
          raw,
          encoding,
        }),
      );
    }
    return 0;
  } finally {
    await db.close();
  }
}
