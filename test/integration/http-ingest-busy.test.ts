import { type Socket, connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/http/server.js';
import { registerHttpIngest } from '../../src/ingest/http-ingest.js';
import { type CreatedApiKey, KeyVerifier, createApiKey } from '../../src/keys/key-store.js';
import { basicAuth } from '../support/api.js';
import { type TestEnv, createTestEnv, quietLogger, waitFor } from '../support/harness.js';

/**
 * POST /v1/events takes in at most so many bytes of bodies at once: past that, a request is
 * answered 503 with Retry-After before its body is read, and goes through once the others are done.
 */

let t: TestEnv;
let app: FastifyInstance;
let port: number;
/** Another tenant's key. */
let other: CreatedApiKey;

beforeAll(async () => {
  t = await createTestEnv();
  other = await createApiKey(t.db.kysely);
  app = createServer({ port: 0, host: '127.0.0.1', tls: null, allowInsecureHttp: false, trustProxy: false, requestTimeoutMs: 60_000, shutdownGraceMs: 5000 }, quietLogger());
  registerHttpIngest(app, { db: t.db, verifier: new KeyVerifier(t.db.kysely), bodiesInFlightBytes: 1000 });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
});

afterAll(async () => {
  await app?.close();
  await t?.cleanup();
});

const event = (i: number) => ({ event: 'open', time: 1_700_000_000 + i, MessageID: String(7000 + i), email: `busy${i}@example.com`, EventID: `busy-${i}` });

/**
 * Starts the slow upload and waits until it holds the budget: a request of `probeEvents` events
 * is then refused. A probe that arrives first is taken and the upload refused instead: both are
 * tried again (fresh events each time).
 */
async function holdBudget(body: string, probeEvents: number, firstId: number): Promise<ReturnType<typeof slowUpload>> {
  let upload = slowUpload(body, 10);
  let n = firstId;
  await waitFor('the slow upload to hold the budget', async () => {
    if (upload.answer() !== '') upload = slowUpload(body, 10);
    await new Promise((r) => setTimeout(r, 20));
    return (await post(Array.from({ length: probeEvents }, () => event(n++)))).status === 503;
  });
  return upload;
}

/** A request whose body arrives in two parts: the first now, the rest when `finish` is called. */
function slowUpload(body: string, firstBytes: number): { socket: Socket; answer: () => string; finish: () => Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString()));
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(
    `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(t.key)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, firstBytes)}`,
  );
  return {
    socket,
    answer: () => answer,
    finish: async () => {
      socket.write(body.slice(firstBytes));
      await ended;
      return answer;
    },
  };
}

const post = (events: unknown[], key: CreatedApiKey = t.key) =>
  fetch(`http://127.0.0.1:${port}/v1/events`, { method: 'POST', headers: { authorization: basicAuth(key), 'content-type': 'application/json' }, body: JSON.stringify(events) });

describe('POST /v1/events bodies in flight', () => {
  it('answers 503 with Retry-After past the budget, before reading the body, and takes the request once the others are done', async () => {
    const big = JSON.stringify([event(1), event(2), event(3), event(4), event(5)]);
    expect(Buffer.byteLength(big)).toBeGreaterThan(500);
    // The upload holds its declared length from its start: another of 500 bytes or more does not fit.
    const upload = await holdBudget(big, 6, 100);
    const refused = await post([event(10), event(11), event(12), event(13), event(14), event(15)]);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({ ErrorInfo: '', ErrorMessage: 'The server is taking in other uploads; nothing of this request was stored: send it again in a moment', StatusCode: 503 });
    // A small one of another tenant still fits beside it; of the same, not: one key holds at most half the budget.
    expect((await post([event(20)], other)).status).toBe(200);
    expect((await post([event(21)])).status).toBe(503);

    expect(await upload.finish()).toMatch(/^HTTP\/1\.1 200 /);
    const again = await post([event(10), event(11), event(12), event(13), event(14), event(15)]);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ Accepted: 6, Rejected: 0 });
  });

  it('holds nothing for a request whose client went away while its credentials were checked', async () => {
    // New keys: each request's check is a hash of its secret (no cached answer), during which the
    // client goes away. Three such holds of 400 bytes would keep the budget of 1000 full for good.
    for (let i = 0; i < 6; i++) {
      const key = await createApiKey(t.db.kysely);
      const socket = connect(port, '127.0.0.1');
      socket.write(`POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(key)}\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n`);
      await new Promise((r) => setTimeout(r, 1));
      socket.destroy();
    }
    await waitFor('the budget free', async () => (await post([event(50), event(51), event(52), event(53), event(54), event(55)], other)).status === 200, 5000);
  });

  it('lets go of what a request held when its client goes away mid-body', async () => {
    const body = JSON.stringify([event(30), event(31), event(32), event(33), event(34), event(35)]);
    const upload = await holdBudget(body, 6, 200);
    upload.socket.destroy();
    await waitFor('the budget back', async () => (await post([event(40), event(41), event(42), event(43), event(44), event(45)])).status === 200);
  });
});
