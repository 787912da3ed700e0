import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db } from '../../src/db/connect.js';
import { type LogEventRow, decodeEventText } from '../../src/events/decode.js';
import { appendEvents, eventKey } from '../../src/log/append.js';
import { advanceCheckpoint, readCheckpoint } from '../../src/log/checkpoints.js';
import { countDeadLetters, writeDeadLetters } from '../../src/log/dead-letters.js';
import { holdLeases, leaseHolder, releaseLease, tryAcquireLease, tryAcquireLeases } from '../../src/log/leases.js';
import { logHead, readEventsAfter } from '../../src/log/read.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { BIG_MESSAGE_ID, sampleEvents, withBareMessageId } from '../support/events.js';

function rows(apiKeyId: string, events: Record<string, unknown>[]): LogEventRow[] {
  return events.map((e) => {
    const r = decodeEventText(withBareMessageId(e), { apiKeyId });
    if (!r.ok) throw new Error(r.reason);
    return r.row;
  });
}

describe.each(DIALECTS)('the event log on %s', (dialect) => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => cleanup());

  it('appends a batch, skips duplicates by (tenant, EventID), and reads back in position order', async () => {
    const batch = rows('1', sampleEvents());
    const first = await appendEvents(db.kysely, batch);
    expect(first.inserted.size).toBe(batch.length);
    const again = await appendEvents(db.kysely, [...batch, ...batch]);
    expect(again.inserted.size).toBe(0);
    // the same EventIDs under another tenant are other events
    const other = await appendEvents(db.kysely, rows('2', sampleEvents()));
    expect(other.inserted.size).toBe(batch.length);

    const read = await readEventsAfter(db.kysely, 0n, 1000);
    expect(read).toHaveLength(batch.length * 2);
    expect(read.map((r) => r.position)).toEqual([...read.map((r) => r.position)].sort((a, b) => (a < b ? -1 : 1)));
    expect(read.slice(0, batch.length).map((r) => r.type)).toEqual(batch.map((r) => r.type));
    expect(await logHead(db.kysely)).toBe(read.at(-1)?.position);
    const after = await readEventsAfter(db.kysely, read[3]?.position ?? 0n, 2);
    expect(after.map((r) => r.position)).toEqual([read[4]?.position, read[5]?.position]);
  });

  it('keeps a 64-bit MessageID exact in the typed column and in the payload', async () => {
    const result = await sql<{ message_id: string; payload_id: string; text: string }>`
      SELECT message_id, payload->>'MessageID' AS payload_id, payload::text AS text
      FROM events WHERE type = 'sent' AND api_key_id = 1`.execute(db.kysely);
    expect(result.rows[0]?.message_id).toBe(BIG_MESSAGE_ID);
    expect(result.rows[0]?.payload_id).toBe(BIG_MESSAGE_ID);
    expect(result.rows[0]?.text).toContain(`"MessageID": ${BIG_MESSAGE_ID}`);
  });

  it('stores ids, enrichment and booleans in typed columns', async () => {
    const [bounce] = await db.kysely.selectFrom('events').selectAll().where('type', '=', 'bounce').where('api_key_id', '=', 1n).execute();
    expect(bounce).toMatchObject({ campaign_id: 7257n, contact_id: 4n, hard_bounce: true, blocked: false, state_id: 1, esp: 'others' });
    expect(typeof bounce?.position).toBe('bigint');
  });

  it('refuses UPDATE, DELETE and TRUNCATE: the log is append-only', async () => {
    await expect(sql`UPDATE events SET type = 'x'`.execute(db.kysely)).rejects.toThrow(/append-only/);
    await expect(sql`DELETE FROM events`.execute(db.kysely)).rejects.toThrow(/append-only/);
    await expect(sql`TRUNCATE events`.execute(db.kysely)).rejects.toThrow(/append-only/);
  });

  it('keys duplicates per tenant', () => {
    expect(eventKey('1', 'a')).not.toBe(eventKey('2', 'a'));
  });

  it('moves a checkpoint only from the expected position', async () => {
    expect(await readCheckpoint(db.kysely, 'p')).toBe(0n);
    expect(await advanceCheckpoint(db.kysely, 'p', 0n, 10n)).toBe(true);
    expect(await advanceCheckpoint(db.kysely, 'p', 0n, 20n)).toBe(false);
    expect(await advanceCheckpoint(db.kysely, 'p', 10n, 20n)).toBe(true);
    expect(await readCheckpoint(db.kysely, 'p')).toBe(20n);
  });

  it('gives a lease to one owner until it expires or is released', async () => {
    expect(await tryAcquireLease(db.kysely, 'projector:x', 'a', 60_000)).toBe(true);
    expect(await tryAcquireLease(db.kysely, 'projector:x', 'b', 60_000)).toBe(false);
    expect(await tryAcquireLease(db.kysely, 'projector:x', 'a', 60_000)).toBe(true); // renewal
    expect((await leaseHolder(db.kysely, 'projector:x'))?.owner).toBe('a');
    await releaseLease(db.kysely, 'projector:x', 'a');
    expect(await tryAcquireLease(db.kysely, 'projector:x', 'b', 50)).toBe(true);
    await new Promise((r) => setTimeout(r, 120));
    expect(await leaseHolder(db.kysely, 'projector:x')).toBeNull();
    expect(await tryAcquireLease(db.kysely, 'projector:x', 'a', 60_000)).toBe(true); // b's lease ran out
  });

  // A replay holds its leases this way: a short lifetime, renewed while it runs, so a killed one
  // lets go soon, a running one never.
  it('holds a set of leases, renewed past their lifetime until released; takes none if one is held', async () => {
    const held = await holdLeases(db.kysely, ['replay:x', 'replay:y'], 'a', 400);
    expect(held.ok).toBe(true);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await tryAcquireLease(db.kysely, 'replay:y', 'b', 60_000)).toBe(false);
    const other = await holdLeases(db.kysely, ['replay:z', 'replay:x'], 'b', 400);
    expect(other).toEqual({ ok: false, taken: 'replay:x' });
    expect(await leaseHolder(db.kysely, 'replay:z')).toBeNull();
    if (held.ok) await held.release();
    expect(await leaseHolder(db.kysely, 'replay:x')).toBeNull();
    expect(await tryAcquireLease(db.kysely, 'replay:y', 'b', 60_000)).toBe(true);
  });

  // A replay's statements can run for minutes, two at a time: with PG_POOL_SIZE=2 a renewal
  // queued in the pool behind them would let the lease lapse, and another replay start.
  it.runIf(dialect === 'postgres')('renews leases held on the lease connection while every pooled connection is busy', async () => {
    const small = await connectDb({ kind: 'postgres', url: url as string, poolSize: 2 });
    try {
      const held = await holdLeases(small.leaseConnection(), ['busy:x'], 'a', 400);
      if (!held.ok) throw new Error(`lease taken: ${held.taken}`);
      const busy = Promise.all([1, 2].map(() => sql`SELECT pg_sleep(1.5)`.execute(small.kysely)));
      await new Promise((r) => setTimeout(r, 1000));
      expect(await tryAcquireLease(db.kysely, 'busy:x', 'b', 60_000)).toBe(false);
      await busy;
      await held.release();
      expect(await leaseHolder(db.kysely, 'busy:x')).toBeNull();
    } finally {
      await small.close();
    }
  });

  // A replay's build step confirms its leases at the end of its transaction, which may have run
  // longer than their lifetime: renewed from the transaction's start, they were already out.
  it('renews a lease within a long transaction for its lifetime from then, not from the transaction start', async () => {
    await db.kysely.transaction().execute(async (trx) => {
      await sql`SELECT pg_sleep(1.2)`.execute(trx);
      expect(await tryAcquireLeases(trx, ['long:x'], 'a', 1000)).toEqual([]);
    });
    expect((await leaseHolder(db.kysely, 'long:x'))?.owner).toBe('a');
    expect(await tryAcquireLease(db.kysely, 'long:x', 'b', 60_000)).toBe(false);
    await releaseLease(db.kysely, 'long:x', 'a');
  });

  it('leaves the leases free once released, whatever renewal was on its way', async () => {
    // Renewals every 5 ms, each a round trip: over 200 releases, some land while one is on its
    // way. A renewal landing after the release's delete would hold the lease for its 20 ms
    // lifetime (before the fix, every one of four runs on Postgres failed here).
    for (let i = 0; i < 200; i++) {
      const held = await holdLeases(db.kysely, ['release:x', 'release:y'], 'a', 20);
      if (!held.ok) throw new Error(`lease taken: ${held.taken}`);
      await new Promise((r) => setTimeout(r, (i % 6) + 1));
      await held.release();
      expect({ i, x: await leaseHolder(db.kysely, 'release:x'), y: await leaseHolder(db.kysely, 'release:y') }).toEqual({ i, x: null, y: null });
    }
  });

  it('stores dead letters once per NATS sequence, keeping the raw bytes', async () => {
    const raw = Buffer.from([0xff, 0x00, 0x7b]);
    const letter = { source: 'nats' as const, subject: 'mail.events.1.open', nats_seq: 77, message_key: 'S/77/1', api_key_id: '1', reason: 'body is not valid UTF-8', raw };
    await writeDeadLetters(db.kysely, [letter]);
    await writeDeadLetters(db.kysely, [letter]); // a redelivery
    await writeDeadLetters(db.kysely, [{ ...letter, message_key: 'S/77/2' }]); // same sequence in a re-created stream
    await writeDeadLetters(db.kysely, [{ source: 'http', api_key_id: '1', reason: 'x\u0000y', raw: Buffer.from('{}') }]);
    await writeDeadLetters(db.kysely, [{ source: 'http', api_key_id: '1', reason: 'x\u0000y', raw: Buffer.from('{}') }]);
    expect(await countDeadLetters(db.kysely)).toEqual({ count: 4, exact: true });
    const stored = await db.kysely.selectFrom('dead_letters').select(['raw', 'reason']).where('message_key', '=', 'S/77/1').executeTakeFirstOrThrow();
    expect(Buffer.from(stored.raw).equals(raw)).toBe(true);
    const escaped = await db.kysely.selectFrom('dead_letters').select('reason').where('source', '=', 'http').execute();
    expect(escaped.map((r) => r.reason)).toEqual(['x\\u0000y', 'x\\u0000y']);
  });
});
