import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { openMigratedDb } from '../../support/databases.js';
import { sampleEvents } from '../../support/events.js';
import { waitFor } from '../../support/harness.js';
import { append } from '../../support/projections.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * One receiver URL for all seven event types (the usual Mailjet setup): seven callback URLs
 * with the same `Url` text. Each has its own connections, as many as its lanes may have requests
 * in flight, so a request never waits inside the HTTP client for a connection another URL holds.
 * The receiver holds its answers until it has one request of every URL open at once; through
 * one shared pool (three connections) that never happens and every request times out.
 */

const TYPES = ['sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub'] as const;
const PER_TYPE = 6;

describe('callback URLs sharing one Url text', () => {
  let db: Db;
  let cleanup: (() => Promise<void>) | undefined;
  let dispatcher: Dispatcher | undefined;
  const held: http.ServerResponse[] = [];
  let open = 0;
  let mostOpen = 0;
  let gateOpen = false;
  const answer = (res: http.ServerResponse) => {
    if (!res.destroyed) res.writeHead(200, { 'content-length': '2' }).end('ok');
  };
  const server = http.createServer((req, res) => {
    open += 1;
    mostOpen = Math.max(mostOpen, open);
    res.on('close', () => (open -= 1));
    req.resume().on('end', () => {
      if (open >= TYPES.length) gateOpen = true;
      if (!gateOpen) return void held.push(res);
      held.splice(0).forEach(answer);
      answer(res);
    });
  });

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    held.splice(0).forEach(answer);
    await dispatcher?.stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await cleanup?.();
  });

  it('gives each its own connections: all of them in flight at once, none timed out', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/all`;
    for (const type of TYPES) await hook(db, '1', { EventType: type, Url: url });
    const events = Array.from({ length: PER_TYPE }, (_, i) => sampleEvents(String(5000 + i)))
      .flat()
      .filter((e) => (TYPES as readonly string[]).includes(String(e['event'])))
      .map((e, i) => ({ ...e, EventID: `pool-${i}` }));
    expect(events).toHaveLength(TYPES.length * PER_TYPE);
    dispatcher = await startDispatcher(db, { urlConcurrency: 2, timeoutMs: 3000, retryScheduleSeconds: [0.5, 0.5] });
    await append(db, '1', events);
    await outboxEmpty(db, 30_000);
    const byOutcome = await sql<{ outcome: string; error_class: string | null; n: number }>`
      SELECT outcome, error_class, count(*)::int AS n FROM webhook_attempts GROUP BY 1, 2 ORDER BY 1, 2`.execute(db.kysely);
    expect(byOutcome.rows).toEqual([{ outcome: 'delivered', error_class: null, n: events.length }]);
    expect(mostOpen).toBeGreaterThanOrEqual(TYPES.length);
    await waitFor('no request left held', async () => held.length === 0, 1000);
  });
});
