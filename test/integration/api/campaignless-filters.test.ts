import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { UA_CHROME } from '../../unit/projections/scenarios/common.js';

/**
 * The shared campaign filter block on messages sent without a campaign: a time window places
 * them by their own time on the per-message resources, flags asked to be false keep them, and
 * the aggregate resources (no time kept for them) leave them out of a window.
 */

/** 2023-11-14T22:13:20Z. */
const T0 = 1_700_000_000;
const D10 = T0 + 10 * 86_400;

const message = (id: string, dims: Record<string, unknown>, at: number) => {
  const base = { MessageID: id, mj_contact_id: Number(id), email: `m${id}@gmail.com`, ...dims };
  return [
    { event: 'sent', EventID: `s${id}`, time: at, ...base },
    { event: 'open', EventID: `o${id}`, time: at + 60, ip: '1.2.3.4', geo: 'FR', agent: UA_CHROME, ...base },
    { event: 'click', EventID: `c${id}`, time: at + 120, url: `https://shop.example/${id}`, ip: '1.2.3.4', geo: 'FR', agent: UA_CHROME, ...base },
    { event: 'bounce', EventID: `b${id}`, time: at + 180, hard_bounce: false, blocked: false, error_related_to: 'domain', error: 'greylisted', ...base },
  ];
};

const EVENTS = [
  { event: 'campaign', EventID: 'camp7', time: T0, mj_campaign_id: 7, Title: 'Spring', IDType: 'Campaign', Status: 2, SendTimeStart: T0, Starred: true },
  // Campaign 7 sent at T0; transactional 1 at T0, transactional 2 ten days later.
  ...message('7001', { mj_campaign_id: 7 }, T0),
  ...message('1', {}, T0),
  ...message('2', {}, D10),
];

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await f.given(f.keys.a, EVENTS);
});
afterAll(async () => f?.close());

const ids = async (resource: string, qs: string): Promise<number[]> => {
  const res = await f.get(`/v3/REST/${resource}${qs === '' ? '' : `?${qs}`}`);
  expect(res.status, `${resource}?${qs}`).toBe(200);
  const data = (res.body as { Data: Record<string, unknown>[] }).Data;
  return data.map((r) => Number(r['MessageID'] ?? r['ID'])).sort((a, b) => a - b);
};

describe('campaign filters on messages sent without a campaign', () => {
  it.each(['openinformation', 'clickstatistics', 'bouncestatistics'])('%s places them in FromTS/ToTS by their own time', async (resource) => {
    expect(await ids(resource, '')).toEqual([1, 2, 7001]);
    expect(await ids(resource, `FromTS=${T0}`)).toEqual([1, 2, 7001]);
    expect(await ids(resource, `FromTS=${T0 + 1}`)).toEqual([2]);
    expect(await ids(resource, `ToTS=${T0 + 1}`)).toEqual([1, 7001]);
    expect(await ids(resource, `FromTS=${D10}&ToTS=${D10 + 1}`)).toEqual([2]);
    expect(await ids(resource, `FromTS=${D10 + 1}`)).toEqual([]);
  });

  it.each(['openinformation', 'clickstatistics', 'bouncestatistics'])('%s keeps them for flags asked to be false, not for flags asked to be true or a CampaignStatus', async (resource) => {
    expect(await ids(resource, 'IsStarred=false')).toEqual([1, 2]);
    expect(await ids(resource, 'IsDeleted=false')).toEqual([1, 2, 7001]);
    expect(await ids(resource, 'IsNewsletterTool=0')).toEqual([1, 2, 7001]);
    expect(await ids(resource, 'IsStarred=true')).toEqual([7001]);
    expect(await ids(resource, 'CampaignStatus=2')).toEqual([7001]);
    expect(await ids(resource, `IsStarred=false&FromTS=${D10}`)).toEqual([2]);
  });

  it('aggregate resources leave them out of a time window, keep them without one', async () => {
    const urls = async (qs: string) => {
      const res = await f.get(`/v3/REST/toplinkclicked?${qs}`);
      expect(res.status).toBe(200);
      return (res.body as { Data: { Url: string }[] }).Data.map((r) => r.Url).sort();
    };
    expect(await urls('')).toEqual(['https://shop.example/1', 'https://shop.example/2', 'https://shop.example/7001']);
    expect(await urls(`FromTS=${T0}`)).toEqual(['https://shop.example/7001']);
    expect(await urls('IsDeleted=false')).toEqual(['https://shop.example/1', 'https://shop.example/2', 'https://shop.example/7001']);
    const opened = async (qs: string) => {
      const res = await f.get(`/v3/REST/geostatistics?${qs}`);
      expect(res.status).toBe(200);
      return (res.body as { Data: { Country: string; OpenedCount: number }[] }).Data.map((r) => [r.Country, r.OpenedCount]);
    };
    expect(await opened('')).toEqual([['FR', 3]]);
    expect(await opened(`FromTS=${T0}`)).toEqual([['FR', 1]]);
  });
});
