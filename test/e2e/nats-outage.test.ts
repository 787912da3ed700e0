import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestEnv, createTestEnv, waitFor } from '../support/harness.js';
import { PrivateNats } from '../support/private-nats.js';
import { spawnCli, stopAll } from '../support/processes.js';

/**
 * `serve` with NATS ingest while its NATS server is away: /status and /metrics say ingest is not
 * consuming and show no NATS backlog, the log says so once (and again when NATS is back), and a SIGTERM meanwhile still
 * ends the process — the client, left reconnecting for ever, held it before.
 */

let t: TestEnv;
let nats: PrivateNats;

beforeAll(async () => {
  t = await createTestEnv({ LOG_LEVEL: 'info' });
  nats = await PrivateNats.create();
});
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  await nats?.destroy();
  await t?.cleanup();
});

async function consuming(url: string): Promise<{ status: boolean | undefined; metric: string | undefined }> {
  const status = (await (await fetch(`${url}/status`)).json()) as { ingest?: { consuming?: boolean } };
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return { status: status.ingest?.consuming, metric: /^mailtally_ingest_consuming (\d)$/m.exec(metrics)?.[1] };
}

/** The NATS backlog as /status and /metrics give it. */
async function backlog(url: string): Promise<{ status: unknown; metric: string[] }> {
  const status = (await (await fetch(`${url}/status`)).json()) as { ingest?: { backlog?: unknown } };
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return { status: status.ingest?.backlog, metric: metrics.split('\n').filter((l) => l.startsWith('mailtally_ingest_nats_backlog_messages{')) };
}

describe('NATS going away under a running ingest', () => {
  it('shows in /status, /metrics and the log, and does not hold a SIGTERM', { timeout: 120_000 }, async () => {
    const p = spawnCli(['serve', '--roles', 'ingest'], { env: { ...t.env, NATS_URL: nats.url } });
    const url = await p.serverUrl();
    await waitFor('ingest consuming', async () => (await consuming(url)).status === true);
    expect(await consuming(url)).toEqual({ status: true, metric: '1' });
    // Read from NATS every 2 s.
    await waitFor('the NATS backlog read', async () => (await backlog(url)).status != null, 10_000, 100);
    expect(await backlog(url)).toEqual({
      status: { pending: 0, ackPending: 0 },
      metric: ['mailtally_ingest_nats_backlog_messages{state="pending"} 0', 'mailtally_ingest_nats_backlog_messages{state="ack_pending"} 0'],
    });

    await nats.kill();
    await waitFor('ingest not consuming', async () => (await consuming(url)).status === false, 20_000, 100);
    expect(await consuming(url)).toEqual({ status: false, metric: '0' });
    // No backlog rather than the last one read.
    expect(await backlog(url)).toEqual({ status: null, metric: [] });
    await p.waitForJson('the log line of the lost connection', (l) => typeof l['msg'] === 'string' && l['msg'].startsWith('NATS connection lost'));

    await nats.start();
    await waitFor('ingest consuming again', async () => (await consuming(url)).status === true, 30_000, 100);
    await p.waitForJson('the log line of the connection back', (l) => l['msg'] === 'NATS connection back: ingest resumes');
    expect(p.jsonLines().filter((l) => typeof l['msg'] === 'string' && l['msg'].startsWith('NATS connection lost'))).toHaveLength(1);

    // Away again, then asked to stop: it stops.
    await nats.kill();
    await waitFor('ingest not consuming', async () => (await consuming(url)).status === false, 20_000, 100);
    p.signal('SIGTERM');
    expect(await p.waitForExit(20_000)).toEqual({ code: 0, signal: null });
    expect(p.jsonLines().map((l) => l['msg'])).toContain('stopped');
  });
});
