import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestEnv, createTestEnv } from '../support/harness.js';
import { spawnCli, stopAll } from '../support/processes.js';

/**
 * Clients that send a request's body slowly (or not at all) against a real `serve` process:
 * they are answered 408 once HTTP_REQUEST_TIMEOUT_MS has passed, and a shutdown closes their
 * connections after HTTP_SHUTDOWN_GRACE_MS instead of waiting for them. The drain they hold up
 * shows what a repeated signal does: the same stop within a second, an exit at once after.
 */

let t: TestEnv;
let env: Record<string, string>;

beforeAll(async () => {
  t = await createTestEnv({ LOG_LEVEL: 'info' });
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  env = withoutNats;
});
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  await t?.cleanup();
});

interface SlowUpload {
  /** Everything the server sent back, once it closed the connection (null while open). */
  readonly answer: () => string | null;
  stop(): void;
}

/** A POST /v1/events announcing 16 MB, then one byte of body every 200 ms (one key holds two such at most: a third is answered 503). */
function slowUpload(url: string, auth: string): Promise<SlowUpload> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let received = '';
    let closed = false;
    const socket = net.connect({ host: hostname, port: Number(port) }, () => {
      socket.write(`POST /v1/events HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: 16000000\r\n\r\n[`);
      const trickle = setInterval(() => {
        if (!closed) socket.write(' ');
      }, 200);
      resolve({
        answer: () => (closed ? received : null),
        stop: () => {
          clearInterval(trickle);
          socket.destroy();
        },
      });
      socket.once('close', () => {
        closed = true;
        clearInterval(trickle);
      });
    });
    socket.setEncoding('utf8').on('data', (s: string) => (received += s));
    socket.on('error', () => {});
    socket.once('error', reject);
  });
}

const basic = () => `Basic ${Buffer.from(`${t.key.ApiKey}:${t.key.SecretKey}`).toString('base64')}`;

async function waitUntil<T>(what: string, probe: () => T | null, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('slow request bodies, and signals during the drain they hold', () => {
  it('are answered 408 in the error envelope once the request timeout has passed, and their connection closed', async () => {
    const p = spawnCli(['serve', '--roles', 'api,ingest'], { env: { ...env, HTTP_REQUEST_TIMEOUT_MS: '2000' } });
    const url = await p.serverUrl();
    const uploads = await Promise.all(Array.from({ length: 2 }, () => slowUpload(url, basic())));
    try {
      // Far longer than the timeout (the server still takes the trickle, one byte a time).
      const answers = await Promise.all(uploads.map((u) => waitUntil('the server to close a slow upload', u.answer, 30_000)));
      for (const answer of answers) {
        expect(answer).toMatch(/^HTTP\/1\.1 408 /);
        expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ ErrorInfo: '', ErrorMessage: 'Request timed out', StatusCode: 408 });
      }
      // The server itself is fine.
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      for (const u of uploads) u.stop();
    }
  }, 90_000);

  it('do not hold a shutdown: their connections are closed after HTTP_SHUTDOWN_GRACE_MS', async () => {
    const p = spawnCli(['serve', '--roles', 'api,ingest'], { env: { ...env, HTTP_SHUTDOWN_GRACE_MS: '1000' } });
    const url = await p.serverUrl();
    const uploads = await Promise.all(Array.from({ length: 2 }, () => slowUpload(url, basic())));
    try {
      await new Promise((r) => setTimeout(r, 500));
      p.signal('SIGTERM');
      // The request timeout (60 s by default) is far off: only the grace ends these uploads.
      expect(await p.waitForExit(40_000)).toEqual({ code: 0, signal: null });
      for (const u of uploads) expect(u.answer()).not.toBeNull();
      expect(p.jsonLines().some((l) => l['msg'] === 'shutting down: closing the HTTP connections of requests still in flight')).toBe(true);
    } finally {
      for (const u of uploads) u.stop();
    }
  }, 90_000);

  /** `serve` with one slow upload holding its drain up to `graceMs`; `signals` sent, then its exit and log. */
  async function signalDuringDrain(graceMs: number, signals: (p: ReturnType<typeof spawnCli>) => Promise<void>) {
    const p = spawnCli(['serve', '--roles', 'api,ingest'], { env: { ...env, HTTP_SHUTDOWN_GRACE_MS: String(graceMs) } });
    const upload = await slowUpload(await p.serverUrl(), basic());
    try {
      // Its request under way in the server (as in the test before).
      await new Promise((r) => setTimeout(r, 500));
      await signals(p);
      return { exit: await p.waitForExit(40_000), messages: p.jsonLines().map((l) => l['msg']) };
    } finally {
      upload.stop();
    }
  }

  // npm passes a terminal's Ctrl-C on to a process that has it already; a supervisor signals the
  // whole process group: the same stop, twice, moments apart.
  it('take a signal repeated within a second as the same stop: the drain still ends', async () => {
    const { exit, messages } = await signalDuringDrain(1000, async (p) => {
      p.signal('SIGTERM');
      await new Promise((r) => setTimeout(r, 50));
      p.signal('SIGTERM');
      await new Promise((r) => setTimeout(r, 250));
      p.signal('SIGINT');
    });
    expect(exit).toEqual({ code: 0, signal: null });
    expect(messages).toContain('stopped');
  }, 90_000);

  it('a second signal a second or more after the first exits at once, without the drain', async () => {
    const { exit, messages } = await signalDuringDrain(60_000, async (p) => {
      p.signal('SIGTERM');
      await new Promise((r) => setTimeout(r, 1500));
      expect(p.exit, 'the slow upload holds the drain').toBeNull();
      p.signal('SIGTERM');
    });
    expect(exit).toEqual({ code: 143, signal: null });
    expect(messages).toContain('second signal: exiting now, without finishing the drain');
  }, 90_000);
});
