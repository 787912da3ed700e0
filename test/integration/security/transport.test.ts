import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { type Service, startService } from '../../../src/main.js';
import { type TestEnv, createTestEnv, quietLogger } from '../../support/harness.js';
import { freePort, runCli } from '../../support/processes.js';
import { reachable } from '../../support/services.js';

/**
 * Plain HTTP only on loopback: on any other HOST the service refuses to start without
 * TLS_CERT/TLS_KEY unless ALLOW_INSECURE_HTTP=true — tested where it happens (startService and
 * `mailtally serve`, not just the config), with nothing left listening after a refusal. With a
 * certificate it serves HTTPS on every interface and answers nothing in clear.
 */

const TLS = (name: string) => fileURLToPath(new URL(`../../fixtures/tls/${name}`, import.meta.url));

let t: TestEnv;
let env: Record<string, string>;
const started: Service[] = [];

beforeAll(async () => {
  t = await createTestEnv();
  const { NATS_URL: _nats, ...withoutNats } = t.env;
  env = withoutNats;
});

afterAll(async () => {
  for (const s of started) await s.stop();
  await t?.cleanup();
});

async function start(overrides: Record<string, string>, roles: ('api' | 'ingest')[] = ['api', 'ingest']): Promise<Service> {
  const s = await startService(loadConfig({ ...env, ...overrides }), roles, quietLogger());
  started.push(s);
  return s;
}

const portOpen = (port: number) => reachable(`http://127.0.0.1:${port}`, port, 500);

describe('plain HTTP off loopback', () => {
  /** Every interface, and this machine's own non-loopback addresses (the refusal comes before any bind). */
  const offLoopback = ['0.0.0.0', '::', ...Object.values(networkInterfaces()).flatMap((list) => (list ?? []).filter((i) => !i.internal).map((i) => i.address)).slice(0, 2)];

  it.each(offLoopback)('is refused on HOST=%s, for the api and the ingest roles alike, and nothing listens', async (host) => {
    for (const roles of [['api'], ['ingest'], ['api', 'ingest']] as ('api' | 'ingest')[][]) {
      const port = await freePort();
      await expect(start({ HOST: host, PORT: String(port) }, roles)).rejects.toThrow(/Refusing to serve plain HTTP on .*TLS_CERT and TLS_KEY/s);
      expect(await portOpen(port)).toBe(false);
    }
  });

  it.each(['127.0.0.1', 'localhost', '::1', '127.0.0.53'])('is served on the loopback HOST=%s', async (host) => {
    const s = await start({ HOST: host });
    expect(s.url).toMatch(/^http:\/\//);
    const res = await fetch(`${s.url as string}/healthz`);
    expect(res.status).toBe(200);
  });

  it('is served on every interface when ALLOW_INSECURE_HTTP=true (a TLS-terminating proxy in front)', async () => {
    const port = await freePort();
    const s = await start({ HOST: '0.0.0.0', PORT: String(port), ALLOW_INSECURE_HTTP: 'true' });
    expect(s.url).toMatch(/^http:\/\//);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  });

  it('stops `mailtally serve` with the reason and a non-zero exit code', async () => {
    const port = await freePort();
    const run = await runCli(['serve', '--roles', 'api'], { env: { ...env, HOST: '0.0.0.0', PORT: String(port), LOG_LEVEL: 'warn' }, timeoutMs: 60_000 });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/Refusing to serve plain HTTP on 0\.0\.0\.0/);
    expect(await portOpen(port)).toBe(false);
  });
});

describe('TLS off loopback', () => {
  it('serves HTTPS on every interface with a certificate, and nothing in clear', async () => {
    const port = await freePort();
    const s = await start({ HOST: '0.0.0.0', PORT: String(port), TLS_CERT: TLS('cert.pem'), TLS_KEY: TLS('key.pem') });
    expect(s.url).toMatch(/^https:\/\//);
    // A plain-HTTP request to the TLS port gets no HTTP answer.
    const plain = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status,
      () => 'no answer',
    );
    expect(plain === 'no answer' || plain === 400).toBe(true);
  });
});
