import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDb, type Db } from '../../src/db/connect.js';
import { PgListener } from '../../src/db/pg-listener.js';
import { waitFor } from '../support/harness.js';
import { sleep } from '../support/processes.js';
import { createTestDatabase, withClient } from '../support/services.js';
import { postgresBehindProxy } from '../support/tcp-proxy.js';

/**
 * `db.listen` on real Postgres: every channel of a process on one connection (a process with
 * every role listens on five), LISTENed again after the connection is lost.
 */

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;

beforeAll(async () => {
  database = await createTestDatabase();
  db = await connectDb({ kind: 'postgres', url: database.url, poolSize: 2 });
}, 60_000);

afterAll(async () => {
  await db?.close();
  await database?.drop();
});

const admin = <T>(query: (c: pg.Client) => Promise<T>): Promise<T> => withClient(database.url, query);

/** The LISTEN connections open on this file's database. */
const listenPids = () =>
  admin(async (c) =>
    (await c.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mailtally:listen'")).rows.map((r) => r.pid),
  );

const notify = (channel: string) => admin((c) => c.query(`NOTIFY ${pg.escapeIdentifier(channel)}`));

/** Handlers that count their calls, by name. */
function counters() {
  const calls = new Map<string, number>();
  return {
    calls,
    handler: (name: string) => () => calls.set(name, (calls.get(name) ?? 0) + 1),
    get: (name: string) => calls.get(name) ?? 0,
  };
}

describe('db.listen on Postgres', () => {
  it('holds one connection for every channel, however many listen at once, and closes it with the last', async () => {
    const c = counters();
    // As a process with every role starts: five listeners at once, two on the same channel.
    const unlisten = await Promise.all([
      db.listen('mt_events', c.handler('projector')),
      db.listen('mt_events', c.handler('fan-out')),
      db.listen('mt_outbox', c.handler('outbox')),
      db.listen('mt_keys', c.handler('keys')),
      db.listen('mt_read_models', c.handler('cache')),
    ]);
    expect(await listenPids()).toHaveLength(1);

    await notify('mt_events');
    await waitFor('both listeners of mt_events', async () => c.get('projector') === 1 && c.get('fan-out') === 1);
    await notify('mt_keys');
    await waitFor('the keys listener', async () => c.get('keys') === 1);
    expect(c.get('outbox')).toBe(0);
    expect(c.get('cache')).toBe(0);

    // One of a channel's two listeners gone: the other still hears it.
    await unlisten[0]?.();
    await notify('mt_events');
    await waitFor('the fan-out listener', async () => c.get('fan-out') === 2);
    expect(c.get('projector')).toBe(1);
    expect(await listenPids()).toHaveLength(1);

    // Stopping twice is harmless.
    await unlisten[0]?.();
    for (const u of unlisten.slice(1)) await u();
    await waitFor('the connection closed', async () => (await listenPids()).length === 0, 5000);
  });

  it('after its connection is lost, LISTENs every channel again on one new connection and calls every listener once', { timeout: 30_000 }, async () => {
    const c = counters();
    const unlisten = await Promise.all([db.listen('mt_a', c.handler('a1')), db.listen('mt_a', c.handler('a2')), db.listen('mt_b', c.handler('b'))]);
    try {
      const [pid] = await listenPids();
      await admin((a) => a.query('SELECT pg_terminate_backend($1)', [pid]));
      // Notifications may have been missed meanwhile: each listener is woken once on reconnecting.
      await waitFor('every listener woken on reconnecting', async () => c.get('a1') === 1 && c.get('a2') === 1 && c.get('b') === 1, 10_000);
      // Once, not once per channel or per try.
      await sleep(300);
      expect([c.get('a1'), c.get('a2'), c.get('b')]).toEqual([1, 1, 1]);
      const after = await listenPids();
      expect(after).toHaveLength(1);
      expect(after[0]).not.toBe(pid);

      await notify('mt_b');
      await waitFor('mt_b heard on the new connection', async () => c.get('b') === 2);
      await notify('mt_a');
      await waitFor('mt_a heard on the new connection', async () => c.get('a1') === 2 && c.get('a2') === 2);
    } finally {
      for (const u of unlisten) await u();
    }
  });

  it('a channel whose LISTEN is refused leaves the others listening and nothing registered', async () => {
    const c = counters();
    const unlisten = await db.listen('mt_kept', c.handler('kept'));
    try {
      const before = await listenPids();
      // A name Postgres refuses (longer than an identifier may be is truncated, not refused;
      // an empty one is refused).
      await expect(db.listen('', () => {})).rejects.toThrow(/zero-length/);
      // The same connection, kept: a refusal says nothing against it.
      await sleep(400);
      expect(await listenPids()).toEqual(before);
      await notify('mt_kept');
      await waitFor('the other channel still heard', async () => c.get('kept') === 1);
      await sleep(200);
      expect(c.get('kept')).toBe(1);
    } finally {
      await unlisten();
    }
  });
});

/** TCP connections open in this process (the proxy's own sockets included). */
const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

describe('PgListener against a server that stops answering', () => {
  it('gives up on a LISTEN or a connection in bounded time, keeps its other work moving, and listens again when the server answers', { timeout: 30_000 }, async () => {
    const { proxy, url } = await postgresBehindProxy(database.url);
    const listener = new PgListener(url.toString(), { timeoutMs: 400 });
    const c = counters();
    try {
      const stopA = await listener.listen('mt_frozen_a', c.handler('a'));
      proxy.freeze();
      // The LISTEN gets no answer: it fails after the timeout, not never.
      const started = Date.now();
      await expect(listener.listen('mt_frozen_b', c.handler('b'))).rejects.toThrow(/timeout/i);
      // The connection in doubt is replaced; the new ones get no answer either, and each try
      // gives up in time, so a listener added meanwhile is answered (refused) too.
      await expect(listener.listen('mt_frozen_c', () => {})).rejects.toThrow(/timeout/i);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(listener.channels).toEqual(['mt_frozen_a']);

      proxy.thaw();
      await waitFor('the listener woken on reconnecting', async () => c.get('a') === 1, 10_000);
      await notify('mt_frozen_a');
      await waitFor('a NOTIFY heard on the new connection', async () => c.get('a') === 2, 10_000);
      expect(c.get('b')).toBe(0);

      // Stopping does not wait on a frozen server for ever either, and leaves no socket open
      // waiting for its goodbye (one would keep the process alive).
      proxy.freeze();
      const open = tcpHandles();
      const stopping = Date.now();
      await stopA();
      expect(Date.now() - stopping).toBeLessThan(3000);
      await waitFor('the listener socket closed', async () => tcpHandles() === open - 1, 3000);
    } finally {
      proxy.thaw();
      await listener.close();
      await proxy.stop();
    }
  });
});

describe('PgListener when the connection goes as its first LISTEN is answered', () => {
  it('opens another and listens on it', { timeout: 30_000 }, async () => {
    // A proxy that holds the server's bytes once the LISTEN is sent, until the server closes
    // the connection (terminated below): the LISTEN's answer and the end come in one read.
    const target = new URL(database.url);
    let held: Buffer[] = [];
    let holding = false;
    let first = true;
    const server = net.createServer((client) => {
      const up = net.connect(Number(target.port || 5432), target.hostname);
      client.on('data', (d: Buffer) => {
        if (first && d.includes('LISTEN')) {
          holding = true;
          first = false;
        }
        up.write(d);
      });
      up.on('data', (d: Buffer) => (holding ? held.push(d) : client.write(d)));
      up.on('end', () => {
        client.end(Buffer.concat(held));
        held = [];
        holding = false;
      });
      for (const s of [client, up]) s.on('error', () => (client.destroy(), up.destroy()));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = new URL(database.url);
    url.hostname = '127.0.0.1';
    url.port = String((server.address() as net.AddressInfo).port);
    const listener = new PgListener(url.toString(), { timeoutMs: 5000 });
    const c = counters();
    try {
      const listening = listener.listen('mt_race', c.handler('race'));
      await waitFor('the LISTEN run', async () => (await listenPids()).length === 1 && holding, 10_000, 20);
      const [pid] = await listenPids();
      await admin((a) => a.query('SELECT pg_terminate_backend($1)', [pid]));
      await listening;
      // Listening again on a new connection: woken once for it, then hearing NOTIFY.
      await waitFor('the listener woken on reconnecting', async () => c.get('race') === 1, 10_000);
      await notify('mt_race');
      await waitFor('a NOTIFY heard', async () => c.get('race') === 2, 10_000);
    } finally {
      await listener.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('PgListener', () => {
  it('refuses to listen once closed, and a server that cannot be reached rejects without keeping anything', async () => {
    const closed = new PgListener(database.url);
    const stop = await closed.listen('mt_closed', () => {});
    await closed.close();
    await stop();
    await expect(closed.listen('mt_closed', () => {})).rejects.toThrow(/closed/);

    const unreachable = new PgListener('postgres://postgres@127.0.0.1:1/postgres');
    await expect(unreachable.listen('mt_x', () => {})).rejects.toThrow();
    expect(unreachable.channels).toEqual([]);
    await sleep(300);
    await unreachable.close();
  });
});
