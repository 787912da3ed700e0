import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../../src/api/routes/index.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { BIG_MESSAGE_ID, sampleEvents } from '../../support/events.js';

/**
 * The tenant-isolation matrix over every resource: tenant `a` has data, tenant `b` has events
 * with the same ids (other recipient, other contact), the read-only key's tenant has none. Every
 * list seen by the empty tenant is empty; every item id of `a` answers 404 to a tenant that does
 * not hold it; `b` never sees `a`'s recipient.
 */

const LISTS: Record<string, string> = {
  statcounters: 'CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime',
  'statistics/link-click': 'CampaignID=7257',
  'statistics/recipient-esp': 'CampaignID=7257',
  messagehistory: `Message=${BIG_MESSAGE_ID}`,
};

/** How an item path is made from a record of the list (resources with an item form). */
const ITEMS: Record<string, (r: Record<string, unknown>) => string> = {
  campaignoverview: (r) => `${String(r['ID'])}`,
  contactstatistics: (r) => `${String(r['ContactID'])}`,
  listrecipientstatistics: (r) => `${String(r['ListRecipientID'])}`,
  toplinkclicked: (r) => `${String(r['ID'])}`,
  bouncestatistics: (r) => `${String(r['ID'])}`,
  clickstatistics: (r) => `${String(r['ID'])}`,
  openinformation: (r) => `${String(r['ID'])}`,
  geostatistics: (r) => `${String(r['Country'])}`,
  message: (r) => `${String(r['ID'])}`,
  // Its list and its item are both one message's events.
  messagehistory: () => BIG_MESSAGE_ID,
};

let f: ApiFixture;
const ONLY_A = '4242';

beforeAll(async () => {
  f = await openApiFixture();
  await f.given(f.keys.a, [...sampleEvents(BIG_MESSAGE_ID), ...sampleEvents(ONLY_A, 1_433_400_000)]);
  const asB = sampleEvents(BIG_MESSAGE_ID).map((e) => (e['event'] === 'campaign' ? e : { ...e, email: 'someone-else@b.example', mj_contact_id: 5 }));
  await f.given(f.keys.b, asB);
});
afterAll(async () => f?.close());

/** Reference data, the same for every key: no tenant's rows in it. */
const SHARED = new Set(['messagestate']);

describe.each(RESOURCES.filter((r) => !SHARED.has(r.name)).map((r) => [r.name] as const))('%s', (name) => {
  const qs = LISTS[name] ?? '';

  it('shows a tenant only its own rows', async () => {
    const a = await f.get(`/v3/REST/${name}?Limit=1000&${qs}`, f.keys.a);
    expect(a.status).toBe(200);
    expect((a.body as { Total: number }).Total).toBeGreaterThan(0);
    const empty = await f.get(`/v3/REST/${name}?Limit=1000&${qs}`, f.keys.readOnly);
    expect(empty.body).toEqual({ Count: 0, Data: [], Total: 0 });
    const b = await f.get(`/v3/REST/${name}?Limit=1000&${qs}`, f.keys.b);
    expect(b.text).not.toContain('api@mailjet.com');
    expect(b.text).not.toContain(ONLY_A);
  });

  const resource = RESOURCES.find((r) => r.name === name);
  it.skipIf(resource?.items === undefined)('answers 404 to another tenant for every item id it does not hold', async () => {
    const item = ITEMS[name];
    expect(item, `an ITEMS entry for ${name}, which has item routes`).toBeDefined();
    const paths = async (key: typeof f.keys.a) => {
      const list = await f.get(`/v3/REST/${name}?Limit=1000&${qs}`, key);
      return (list.body as { Data: Record<string, unknown>[] }).Data.map((row) => `/v3/REST/${name}/${encodeURIComponent(item!(row))}`);
    };
    const ofA = await paths(f.keys.a);
    expect(ofA.length).toBeGreaterThan(0);
    const ofB = new Set(await paths(f.keys.b));
    for (const path of ofA) {
      expect((await f.get(path, f.keys.a)).status, path).toBe(200);
      expect(await f.get(path, f.keys.readOnly), path).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found', StatusCode: 404 } });
      // `b`, whose own ids overlap `a`'s elsewhere, gets an item only where its own list holds it.
      expect((await f.get(path, f.keys.b)).status, path).toBe(ofB.has(path) ? 200 : 404);
    }
  });
});

it.each([...SHARED])('serves %s, reference data, alike to every key', async (name) => {
  const a = await f.get(`/v3/REST/${name}?Limit=1000`, f.keys.a);
  expect((a.body as { Total: number }).Total).toBeGreaterThan(0);
  expect((await f.get(`/v3/REST/${name}?Limit=1000`, f.keys.readOnly)).body).toEqual(a.body);
});

it('answers 404 for messagehistory of a message only another tenant has', async () => {
  expect((await f.get(`/v3/REST/messagehistory/${ONLY_A}`, f.keys.a)).status).toBe(200);
  expect((await f.get(`/v3/REST/messagehistory/${ONLY_A}`, f.keys.b)).status).toBe(404);
});
