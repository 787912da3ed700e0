import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEEP_OFFSET } from '../../../src/api/list-query.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

/** Deep pages (Offset past DEEP_OFFSET, read through their keys) equal the same slice of one long page. */

const MESSAGES = DEEP_OFFSET + 120;
let f: ApiFixture;

beforeAll(async () => {
  f = await openApiFixture();
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < MESSAGES; i++) {
    const common = { MessageID: String(10_000 + ((i * 7919) % 100_000)), email: `r${i % 300}@gmail.com`, mj_campaign_id: 1 + (i % 3), mj_contact_id: 1 + (i % 300) };
    const t = 1_700_000_000 + ((i * 37) % 5000);
    events.push({ event: 'sent', time: t, ...common });
    events.push({ event: 'open', time: t + 10 + (i % 7), ...common, agent: 'Mozilla/5.0', ip: '1.2.3.4', geo: 'FR' });
    events.push({ event: 'click', time: t + 20 + (i % 5), ...common, url: `https://example.com/${i % 4}`, agent: 'Mozilla/5.0', ip: '1.2.3.4', geo: 'FR' });
    events.push({ event: 'bounce', time: t + 30, ...common, hard_bounce: i % 2 === 0, blocked: false, error_related_to: 'recipient', error: 'user unknown' });
  }
  await f.given(f.keys.a, events);
});
afterAll(async () => f?.close());

describe.each([
  ['clickstatistics', ''],
  ['clickstatistics', 'Sort=ClickedAt DESC'],
  ['bouncestatistics', 'Sort=BouncedAt'],
  ['openinformation', 'CampaignID=2&Sort=OpenedAt DESC'],
  ['message', 'Sort=ArrivedAt'],
  ['contactstatistics', 'Sort=ProcessedCount DESC'],
])('%s?%s', (resource, qs) => {
  it('gives the same rows on a deep page as in one long list', async () => {
    const all = await f.get(`/v3/REST/${resource}?Limit=1000&${qs}`);
    const rows = (all.body as { Data: unknown[]; Total: number }).Data;
    const offset = Math.min(DEEP_OFFSET + 3, Math.max(0, rows.length - 20));
    const deep = await f.get(`/v3/REST/${resource}?Limit=15&Offset=${offset}&${qs}`);
    expect(deep.status).toBe(200);
    expect(deep.body).toEqual({ Count: rows.slice(offset, offset + 15).length, Data: rows.slice(offset, offset + 15), Total: rows.length });
  });
});
