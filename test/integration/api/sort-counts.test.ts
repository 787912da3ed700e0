import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { loadMessageEvents } from './message-events-data.js';

/** The counts, delays and rates a resource shows sort too (README, The read API: Sort). */

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await loadMessageEvents(f);
});
afterAll(async () => f?.close());

const values = async (path: string, field: string, sort: string): Promise<number[]> => {
  const res = await f.get(`${path}${path.includes('?') ? '&' : '?'}Sort=${encodeURIComponent(sort)}`);
  expect(res.status, `${path} Sort=${sort}: ${res.text}`).toBe(200);
  return (res.body as { Data: Record<string, number>[] }).Data.map((r) => r[field] as number);
};
const ascending = (v: number[]) => v.every((x, i) => i === 0 || (v[i - 1] as number) <= x);
const descending = (v: number[]) => v.every((x, i) => i === 0 || (v[i - 1] as number) >= x);

describe('Sort on counts, delays and rates', () => {
  it.each([
    ['/v3/REST/message', 'AttemptCount'],
    ['/v3/REST/clickstatistics', 'ClickedDelay'],
    ['/v3/REST/statistics/recipient-esp?CampaignID=7', 'OpenRate'],
    ['/v3/REST/statistics/recipient-esp?CampaignID=7', 'HardBouncedRate'],
    ['/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime', 'MessageWorkFlowExitedCount'],
    ['/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Event&CounterResolution=Lifetime', 'EventWorkflowExitedCount'],
  ])('%s by %s, both ways', async (path, field) => {
    const up = await values(path, field, field);
    const down = await values(path, field, `${field} DESC`);
    expect(up.length).toBeGreaterThan(0);
    expect(ascending(up), `${field}: ${up.join(',')}`).toBe(true);
    expect(descending(down), `${field} DESC: ${down.join(',')}`).toBe(true);
    expect([...down].reverse()).toEqual(up);
  });

  it('orders by the values shown, and they differ where the data differ', async () => {
    // In this data, AttemptCount and ClickedDelay take more than one value: the sort is not vacuous.
    expect(new Set(await values('/v3/REST/message', 'AttemptCount', 'AttemptCount')).size).toBeGreaterThan(1);
    expect(new Set(await values('/v3/REST/clickstatistics', 'ClickedDelay', 'ClickedDelay')).size).toBeGreaterThan(1);
  });
});
