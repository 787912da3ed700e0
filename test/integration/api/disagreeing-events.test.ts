import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

/**
 * A message whose events disagree on its campaign, list and address counts under the largest of
 * each (projections/kit/message-facts.ts); the other rows its events name keep their part of its
 * one-way values (a campaign its message time, an address or list recipient what the events that
 * carry it say) but count none of its numbers, and the API lists a row only once some message
 * counts there. Message 1's `queued` names campaign 3, its `sent` campaign 5 (ann, list 21), its
 * `open` campaign 7 (bob, list 22): it counts in 7, bob, (22, bob). Message 2 agrees with itself:
 * campaign 5, ann, list 21. Message 3 (dan, campaign 5) is sent from list 21 and opened from
 * list 24: it counts under (24, dan), and (21, dan) counts nothing.
 */
let f: ApiFixture;
const T0 = 1_700_000_000;
const at = (s: number) => new Date(s * 1000).toISOString().replace('.000Z', 'Z');

beforeAll(async () => {
  f = await openApiFixture();
  const ann = { email: 'ann@gmail.com', mj_list_id: 21, mj_contact_id: 11 };
  const bob = { email: 'bob@yahoo.com', mj_list_id: 22, mj_contact_id: 12 };
  await f.given(f.keys.a, [
    { event: 'queued', time: T0 - 5, MessageID: '1', ...ann, mj_campaign_id: 3 },
    { event: 'sent', time: T0, MessageID: '1', ...ann, mj_campaign_id: 5 },
    { event: 'open', time: T0 + 600, MessageID: '1', ...bob, mj_campaign_id: 7 },
    { event: 'sent', time: T0 + 100, MessageID: '2', ...ann, mj_campaign_id: 5 },
    { event: 'sent', time: T0 + 200, MessageID: '3', email: 'dan@aol.com', mj_list_id: 21, mj_contact_id: 13, mj_campaign_id: 5 },
    { event: 'open', time: T0 + 250, MessageID: '3', email: 'dan@aol.com', mj_list_id: 24, mj_contact_id: 13, mj_campaign_id: 5 },
  ]);
});
afterAll(async () => f?.close());

const data = async (path: string) => {
  const res = await f.get(path);
  expect(res.status, path).toBe(200);
  return res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
};

describe('a message whose events disagree on its campaign, list and address', () => {
  it('counts in the largest campaign; every campaign its events name that counts a message takes its message time', async () => {
    const body = await data('/v3/REST/campaignoverview');
    expect(body.Data.map((c) => [c['ID'], c['ProcessedCount'], c['DeliveredCount'], c['OpenedCount'], c['SendTimeStart']])).toEqual([
      [5, 2, 2, 1, T0 - 5],
      [7, 1, 1, 1, T0 - 5],
    ]);
    expect(body.Total).toBe(2);
    // Campaign 3 counts no message: named by message 1's queued event only.
    expect((await f.get('/v3/REST/campaignoverview/3')).status).toBe(404);
  });

  it('lists only the recipients and list recipients that count a message', async () => {
    const contacts = await data('/v3/REST/contactstatistics');
    expect(contacts.Data.map((c) => [c['ContactID'], c['ProcessedCount'], c['OpenedCount'], c['LastActivityAt']])).toEqual([
      [11, 1, 0, at(T0 + 100)], // ann: message 2 (message 1's events that carry ann are older)
      [12, 1, 1, at(T0 + 600)], // bob: message 1
      [13, 1, 1, at(T0 + 250)], // dan: message 3
    ]);
    expect(contacts.Total).toBe(3);
    // A ContactID names the addresses whose events carry it, not those its message moved away from.
    expect((await data('/v3/REST/contactstatistics/12')).Total).toBe(1);
    const recipients = await data('/v3/REST/listrecipientstatistics?Sort=LastActivityAt');
    expect(recipients.Data.map((r) => [r['ProcessedCount'], r['OpenedCount'], r['LastActivityAt']])).toEqual([
      [1, 0, at(T0 + 100)], // (21, ann): message 2
      [1, 1, at(T0 + 250)], // (24, dan): message 3
      [1, 1, at(T0 + 600)], // (22, bob): message 1
    ]);
    expect(recipients.Total).toBe(3);
    expect((await data('/v3/REST/listrecipientstatistics?ContactsList=22')).Total).toBe(1);
    // (21, dan) counts no message: list 21 lists ann alone.
    expect((await data('/v3/REST/listrecipientstatistics?countOnly=1&ContactsList=21')).Total).toBe(1);
  });

  it('answers 404 for a named row that counts no message, by its id', async () => {
    const { rows: hidden } = await sql<{ id: string }>`SELECT list_recipient_id::text AS id FROM list_recipient_stats WHERE messages = 0 ORDER BY list_id, email`.execute(f.db.kysely);
    expect(hidden).toHaveLength(1); // (21, dan)
    for (const { id } of hidden) expect((await f.get(`/v3/REST/listrecipientstatistics/${id}`)).status).toBe(404);
  });
});
