import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { DIALECTS } from '../../support/databases.js';

/**
 * Text filters that ignore case (From, ContactAlt, Subject, an Email item key): the read models'
 * text is `COLLATE "C"`, so both sides are folded by the database alike, and a value always finds
 * the text it repeats exactly, capitals outside A–Z included (French and German subjects and
 * names); A–Z match in any case.
 */

describe.each(DIALECTS)('case-insensitive text filters on %s', (dialect) => {
  let f: ApiFixture;
  beforeAll(async () => {
    f = await openApiFixture({ dialect });
    await f.given(f.keys.a, [
      { event: 'campaign', EventID: 'c', time: 1_600_000_000, mj_campaign_id: 8000, Title: 'T', Subject: 'Écoutez: Été ÜBER Angebote', IDType: 'Campaign', Status: 2, SendTimeStart: 1_600_000_000 },
      { event: 'sent', EventID: 's', time: 1_600_000_000, MessageID: '777', email: 'Ünïcödé@Exämple.com', mj_campaign_id: 8000, sender: 'Élodie@Boutique.fr' },
    ]);
  });
  afterAll(async () => f?.close());

  const total = async (path: string) => {
    const r = await f.get(path);
    expect(r.status, path).toBe(200);
    return (JSON.parse(r.text) as { Total: number }).Total;
  };
  const e = encodeURIComponent;

  it('finds the text it repeats exactly, and ASCII letters in any case', async () => {
    for (const subject of ['Écoutez', 'Été ÜBER', 'Über ANGEBOTE', 'ANGEBOTE']) expect(await total(`/v3/REST/campaignoverview?countOnly=1&Subject=${e(subject)}`), subject).toBe(1);
    for (const address of ['Ünïcödé@Exämple.com', 'Ünïcödé@EXäMPLE.COM']) expect(await total(`/v3/REST/message?countOnly=1&ContactAlt=${e(address)}`), address).toBe(1);
    for (const sender of ['Élodie@Boutique.fr', 'ÉLODIE@boutique.FR']) expect(await total(`/v3/REST/message?countOnly=1&From=${e(sender)}`), sender).toBe(1);
    expect((await f.get(`/v3/REST/contactstatistics/${e('Ünïcödé@exämple.COM')}`)).status).toBe(200);
  });

  it('finds nothing for other text', async () => {
    expect(await total(`/v3/REST/campaignoverview?countOnly=1&Subject=${e('Ecoutez')}`)).toBe(0);
    expect(await total(`/v3/REST/message?countOnly=1&ContactAlt=${e('Unicode@Example.com')}`)).toBe(0);
  });
});
