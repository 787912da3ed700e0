import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { createLogger } from '../../src/logger.js';
import { Projector } from '../../src/projector/runner.js';
import { waitFor } from '../support/harness.js';
import { migratedDbBehindProxy } from '../support/databases.js';
import type { TcpProxy } from '../support/tcp-proxy.js';

/**
 * The projector's lease renewals while its database is away fail together: one log line names
 * every projection it stops applying (it was a line each, a dozen at every outage).
 */

class Capture extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) if (line !== '') this.lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  }
}

let cleanup: () => Promise<void>;
let proxy: TcpProxy;
let db: Db;

beforeAll(async () => {
  ({ db, proxy, cleanup } = await migratedDbBehindProxy());
});

afterAll(async () => {
  await cleanup?.();
});

describe('projector leases while the database is away', () => {
  it('says in one line that it stops applying every projection, and takes them back after', { timeout: 60_000 }, async () => {
    const capture = new Capture();
    const projector = new Projector(db, PROJECTIONS, { batchSize: 500, pollMs: 50, leaseMs: 900, cacheGroups: 1000 }, createLogger('info', 'mailtally', capture));
    await projector.start();
    let down = false;
    try {
      await waitFor('every lease held', async () => projector.stats.held.length === PROJECTIONS.length);
      await proxy.cut();
      down = true;
      const failed = () => capture.lines.filter((l) => l['msg'] === 'projection lease renewal failed: not applying them until a renewal succeeds');
      await waitFor('the renewal to fail', async () => failed().length > 0, 20_000);
      // Several renewal periods more: still the one line.
      await new Promise((r) => setTimeout(r, 1500));
      expect(failed()).toHaveLength(1);
      expect([...(failed()[0]?.['projections'] as string[])].sort()).toEqual(PROJECTIONS.map((p) => p.name).sort());
      await proxy.restore();
      down = false;
      await waitFor('every lease held again', async () => projector.stats.held.length === PROJECTIONS.length, 30_000);
    } finally {
      if (down) await proxy.restore();
      await projector.stop();
    }
  });
});
