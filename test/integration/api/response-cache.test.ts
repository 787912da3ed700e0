import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseCache } from '../../../src/api/response-cache.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { waitFor } from '../../support/harness.js';
import { append, caughtUp, startProjector } from '../../support/projections.js';
import type { Projector } from '../../../src/projector/runner.js';

/**
 * The read API keeps answers until the read models change: a projector batch (or a replay)
 * moves a checkpoint, Postgres notifies, and the next request reads the new rows.
 */

const LIFETIME = '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime';
const sent = (id: string, time: number) => ({ event: 'sent', time, MessageID: id, email: `${id}@gmail.com` });

describe.each(['postgres', 'pglite'] as const)('response cache on %s', (dialect) => {
  let f: ApiFixture;
  let projector: Projector;
  beforeAll(async () => {
    f = await openApiFixture({ dialect, cache: true });
    projector = await startProjector(f.db);
  });
  afterAll(async () => {
    await projector?.stop();
    await f?.close();
  });

  const total = async () => ((await f.get(LIFETIME)).body as { Data: { Total: number }[] }).Data[0]?.Total ?? 0;

  it('serves the new numbers as soon as the projector has committed them', async () => {
    await append(f.db, f.keys.a.APIKeyID, [sent('1', 1_700_000_000)]);
    await caughtUp(f.db);
    await waitFor('the first message counted', async () => (await total()) === 1);
    // Repeated reads are answered from the cache…
    expect(await total()).toBe(1);
    // …until the read models change.
    await append(f.db, f.keys.a.APIKeyID, [sent('2', 1_700_000_100), sent('3', 1_700_000_200)]);
    await caughtUp(f.db);
    await waitFor('the new messages counted', async () => (await total()) === 3, 5000);
  });

  it('keeps tenants apart in the cache', async () => {
    const b = await f.get(LIFETIME, f.keys.b);
    expect(b.body).toEqual({ Count: 0, Data: [], Total: 0 });
  });
});

describe('ResponseCache', () => {
  it('never keeps an answer read before a change it did not see', () => {
    const c = new ResponseCache({ maxEntries: 10, ttlMs: 60_000 });
    const generation = c.generation;
    c.invalidate(); // a notification arrived while the request ran
    c.set('k', 'stale', generation);
    expect(c.get('k')).toBeUndefined();
    c.set('k', 'fresh', c.generation);
    expect(c.get('k')).toBe('fresh');
    c.invalidate();
    expect(c.get('k')).toBeUndefined();
  });

  it('computes an answer once for identical requests that arrive together', async () => {
    const c = new ResponseCache({ maxEntries: 10, ttlMs: 60_000 });
    let runs = 0;
    let release: (v: string) => void = () => {};
    const compute = () => {
      runs++;
      return new Promise<string>((r) => (release = r));
    };
    const both = Promise.all([c.answer('k', compute), c.answer('k', compute)]);
    release('body');
    expect(await both).toEqual(['body', 'body']);
    expect(runs).toBe(1);
    expect(await c.answer('k', compute)).toBe('body');
    expect(runs).toBe(1);
  });

  it('does not share a computation across a change', async () => {
    const c = new ResponseCache({ maxEntries: 10, ttlMs: 60_000 });
    const first = c.answer('k', async () => 'old');
    c.invalidate();
    expect(await c.answer('k', async () => 'new')).toBe('new');
    expect(await first).toBe('old');
    expect(await c.answer('k', async () => 'unused')).toBe('new');
  });

  it('bounds entries by count, age and size', () => {
    let now = 0;
    const c = new ResponseCache({ maxEntries: 2, ttlMs: 100, maxBodyBytes: 10, now: () => now });
    c.set('a', '1', 0);
    c.set('b', '2', 0);
    c.set('c', '3', 0);
    expect([c.get('a'), c.get('b'), c.get('c')]).toEqual([undefined, '2', '3']);
    c.set('big', 'x'.repeat(11), 0);
    expect(c.get('big')).toBeUndefined();
    now = 100;
    expect(c.get('b')).toBeUndefined();
    expect(new ResponseCache({ maxEntries: 0, ttlMs: 100 }).enabled).toBe(false);
  });

  it('bounds the characters of all its answers together, dropping the oldest first', () => {
    const c = new ResponseCache({ maxEntries: 1000, ttlMs: 60_000, maxBytes: 100 });
    for (let i = 0; i < 10; i++) c.set(`k${i}`, String(i).repeat(30), 0);
    expect(c.bytes).toBeLessThanOrEqual(100);
    expect([0, 1, 2, 3, 4, 5, 6].map((i) => c.get(`k${i}`))).toEqual(Array(7).fill(undefined));
    expect([7, 8, 9].map((i) => c.get(`k${i}`))).toEqual(['7'.repeat(30), '8'.repeat(30), '9'.repeat(30)]);
    // The same key again replaces its answer and its size (keys count: 2 + 30 for k7, k8; 2 + 1 for k9).
    c.set('k9', 'x', 0);
    expect(c.bytes).toBe(67);
    c.invalidate();
    expect(c.bytes).toBe(0);
  });

  it('counts the keys too: long URLs with tiny answers stay within the bound', () => {
    const c = new ResponseCache({ maxEntries: 1000, ttlMs: 60_000, maxBytes: 1000 });
    for (let i = 0; i < 100; i++) c.set(`a\n/v3/REST/message?junk=${'x'.repeat(300)}&n=${i}`, '{}', 0);
    expect(c.bytes).toBeLessThanOrEqual(1000);
    expect(c.get(`a\n/v3/REST/message?junk=${'x'.repeat(300)}&n=99`)).toBe('{}');
    expect(c.get(`a\n/v3/REST/message?junk=${'x'.repeat(300)}&n=0`)).toBeUndefined();
  });
});
