import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { type LogEventRow, decodeEventBytes, decodeEventText } from '../../src/events/decode.js';
import { copyAppend } from '../../src/log/copy-append.js';
import { openMigratedDb } from '../support/databases.js';

/** The COPY append path on real Postgres, including its race with a concurrent writer. */

function rows(ids: string[], extra = ''): LogEventRow[] {
  return ids.map((id) => {
    const r = decodeEventText(`{"event":"open","time":1,"MessageID":19421777835146490,"email":"a@b.co","EventID":"${id}"${extra}}`, { apiKeyId: '1' });
    if (!r.ok) throw new Error(r.reason);
    return r.row;
  });
}

describe('copyAppend', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
  });
  afterAll(async () => cleanup());

  const pool = () => db.pool as pg.Pool;
  const pgDb = () => ({ ...db, pool: pool() });
  const stored = async () => (await pool().query<{ event_id: string }>('SELECT event_id FROM events ORDER BY position')).rows.map((r) => r.event_id);

  it('stores new rows in order, skips stored ones and repeats within the batch, and escapes text', async () => {
    const tricky = ',"agent":"tab\\there\\nnew line \\\\ back\\\\slash","Payload":"\\\\N"';
    expect(await copyAppend(pgDb(), rows(['a', 'b'], tricky), [])).toBe(2);
    const again = await copyAppend(pgDb(), rows(['b', 'c', 'c', 'd']), [{ source: 'nats', reason: 'bad', raw: Buffer.from('x'), message_key: 'k1' }]);
    expect(again).toBe(2);
    expect(await stored()).toEqual(['a', 'b', 'c', 'd']);
    const row = await pool().query<{ p: { agent: string; Payload: string }; m: string }>("SELECT payload AS p, message_id::text AS m FROM events WHERE event_id = 'a'");
    expect(row.rows[0]?.p.agent).toBe('tab\there\nnew line \\ back\\slash');
    expect(row.rows[0]?.p.Payload).toBe('\\N');
    expect(row.rows[0]?.m).toBe('19421777835146490');
    expect((await pool().query('SELECT count(*)::int AS n FROM dead_letters')).rows[0]).toEqual({ n: 1 });
  });

  it('waits for a concurrent writer, then skips the row it committed and stores the rest once', async () => {
    const other = new pg.Client({ connectionString: (pool().options as { connectionString: string }).connectionString });
    await other.connect();
    try {
      await other.query('BEGIN');
      // Holds the append lock and an uncommitted 'race' row that copyAppend cannot see yet.
      await other.query(`INSERT INTO events (event_id, api_key_id, type, event_time, payload) VALUES ('race', 1, 'open', 1, '{}')`);
      let done = false;
      const pending = copyAppend(pgDb(), rows(['e', 'race', 'f']), []).finally(() => (done = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(done).toBe(false); // blocked on the append lock the other writer holds
      await other.query('COMMIT');
      expect(await pending).toBe(2);
    } finally {
      await other.end();
    }
    expect(await stored()).toEqual(['a', 'b', 'c', 'd', 'race', 'e', 'f']);
  });

  it('leaves nothing staged behind a refused batch: the next batch on the same connections stores only its own rows', async () => {
    const bad = rows(['g', 'h']);
    (bad[1] as LogEventRow).payload = '{"not json';
    await expect(copyAppend(pgDb(), bad, [])).rejects.toThrow(/json/i);
    // Every pooled connection takes a turn, so whichever one staged 'g' is used again.
    for (const id of ['i', 'j', 'k', 'l']) expect(await copyAppend(pgDb(), rows([id]), [])).toBe(1);
    expect(await stored()).toEqual(['a', 'b', 'c', 'd', 'race', 'e', 'f', 'i', 'j', 'k', 'l']);
  });

  it('stores each key once when batches that share keys are appended at the same time', async () => {
    const before = (await stored()).length;
    // Eight batches on eight connections, each overlapping its neighbours (and the rows stored above).
    const batches = Array.from({ length: 8 }, (_, b) => rows([...Array.from({ length: 40 }, (_, i) => `p${b * 20 + i}`), 'a', 'k']));
    const counts = await Promise.all(batches.map((batch) => copyAppend(pgDb(), batch, [])));
    const ids = await stored();
    expect(ids.length).toBe(before + 180);
    expect(new Set(ids).size).toBe(ids.length);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(180);
  });

  it('stores a NATS body as sent, copied from its bytes or escaped from its text', async () => {
    const bodies = {
      plain: '{"event":"open","time":1,"MessageID":7,"email":"é@b.co","EventID":"u1","agent":"Zürich ✓ 😀","Payload":"{}"}',
      escaped: '{"event":"open","time":1,"MessageID":7,"email":"a@b.co","EventID":"u2","agent":"tab\\there \\\\ \\"q\\"","Payload":"\\\\N"}',
    };
    const decoded = Object.values(bodies).map((text) => {
      const r = decodeEventBytes(new TextEncoder().encode(text), { apiKeyId: '1' });
      if (!r.ok) throw new Error(r.reason);
      return r.row;
    });
    expect(decoded.map((r) => r.payloadUtf8 !== undefined)).toEqual([true, true]);
    expect(await copyAppend(pgDb(), decoded, [])).toBe(2);
    const got = await pool().query<{ event_id: string; p: string; email: string }>("SELECT event_id, payload::text AS p, email FROM events WHERE event_id IN ('u1', 'u2') ORDER BY event_id");
    expect(got.rows.map((r) => JSON.parse(r.p))).toEqual(Object.values(bodies).map((t) => JSON.parse(t)));
    expect(got.rows[0]?.email).toBe('é@b.co');
  });

  it('writes dead letters alone, without touching the log', async () => {
    const before = (await pool().query('SELECT count(*)::int AS n FROM dead_letters')).rows[0] as { n: number };
    expect(await copyAppend(pgDb(), [], [{ source: 'nats', reason: 'bad', raw: Buffer.from('y'), message_key: 'k2' }])).toBe(0);
    expect((await pool().query('SELECT count(*)::int AS n FROM dead_letters')).rows[0]).toEqual({ n: before.n + 1 });
    expect((await stored()).length).toBe(11 + 180 + 2);
  });
});
