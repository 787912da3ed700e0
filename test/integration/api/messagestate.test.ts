import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
});
afterAll(async () => f?.close());

describe('GET /v3/REST/messagestate', () => {
  it('lists the 21 message states by StateID, as {ID, RelatedTo, State}', async () => {
    const res = await f.get('/v3/REST/messagestate?Limit=0');
    expect(res.status).toBe(200);
    const body = res.body as { Count: number; Data: Record<string, unknown>[]; Total: number };
    expect(body.Count).toBe(21);
    expect(body.Total).toBe(21);
    expect(body.Data.map((r) => r['ID'])).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    expect(body.Data[0]).toEqual({ ID: 1, RelatedTo: 'recipient', State: 'user unknown' });
    expect(body.Data[13]).toEqual({ ID: 14, RelatedTo: 'mailjet', State: 'preblocked' });
    expect(body.Data[20]).toEqual({ ID: 21, RelatedTo: 'recipient', State: 'spam reporter' });
  });

  it('pages, counts and sorts by ID as every list does', async () => {
    expect(await f.get('/v3/REST/messagestate?Limit=2&Offset=5')).toMatchObject({ status: 200, body: { Count: 2, Total: 21, Data: [{ ID: 6 }, { ID: 7 }] } });
    expect((await f.get('/v3/REST/messagestate?countOnly=1')).body).toEqual({ Count: 21, Data: [], Total: 21 });
    expect(await f.get('/v3/REST/messagestate?Sort=ID+DESC&Limit=1')).toMatchObject({ body: { Data: [{ ID: 21 }] } });
    expect(await f.get('/v3/REST/messagestate?Sort=State')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/Sort.*sort by ID/) } });
  });

  it('answers one state by its ID; 404 for an unknown one, 400 naming ID for a malformed one', async () => {
    expect((await f.get('/v3/REST/messagestate/13')).body).toEqual({ Count: 1, Data: [{ ID: 13, RelatedTo: 'domain', State: 'greylisted' }], Total: 1 });
    expect(await f.get('/v3/REST/messagestate/22')).toMatchObject({ status: 404, body: { ErrorMessage: 'Object not found' } });
    expect(await f.get('/v3/REST/messagestate/0')).toMatchObject({ status: 404 });
    expect(await f.get('/v3/REST/messagestate/x')).toMatchObject({ status: 400, body: { ErrorMessage: expect.stringMatching(/ID/) } });
  });

  it('gives the StateID /bouncestatistics gives a bounce its text', async () => {
    await f.given(f.keys.a, [
      { event: 'sent', time: 1_700_000_000, MessageID: 77, email: 'x@example.com', mj_campaign_id: 5 },
      { event: 'bounce', time: 1_700_000_060, MessageID: 77, email: 'x@example.com', mj_campaign_id: 5, hard_bounce: true, blocked: false, error_related_to: 'recipient', error: 'quota exceeded' },
    ]);
    const bounce = await f.get('/v3/REST/bouncestatistics/77');
    const stateId = (bounce.body as { Data: { StateID: number }[] }).Data[0]?.StateID;
    expect((await f.get(`/v3/REST/messagestate/${stateId}`)).body).toMatchObject({ Data: [{ RelatedTo: 'recipient', State: 'quota exceeded' }] });
  });
});
