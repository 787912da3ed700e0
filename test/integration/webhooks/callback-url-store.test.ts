import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { stringifyExactJson } from '../../../src/events/exact-json.js';
import { parseCallbackUrlFilters } from '../../../src/webhooks/callback-url-input.js';
import {
  CallbackUrlError,
  createCallbackUrl,
  deleteCallbackUrl,
  getCallbackUrl,
  listCallbackUrls,
  toWire,
  updateCallbackUrl,
} from '../../../src/webhooks/callback-url-store.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';

const page = { limit: 10, offset: 0 };
const filters = (q: Record<string, string>) => {
  const f = parseCallbackUrlFilters(q);
  if (!f.ok) throw new Error(f.message);
  return f.value;
};

describe.each(DIALECTS)('callback URL store on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => cleanup?.());

  it('creates a URL, returns its signing secret once, and maps it to Mailjet`s wire fields', async () => {
    const { callbackUrl, secret } = await createCallbackUrl(db.kysely, '1', { EventType: 'open', Url: 'https://u:p@example.com/open', Version: '2' });
    expect(secret).toMatch(/^whsec_/);
    expect(toWire(callbackUrl)).toEqual({ ID: callbackUrl.id, APIKeyID: 1n, EventType: 'open', IsBackup: false, Status: 'alive', Url: 'https://u:p@example.com/open', Version: 2 });
    expect(stringifyExactJson(toWire(callbackUrl))).toBe(
      `{"APIKeyID":1,"EventType":"open","ID":${callbackUrl.id},"IsBackup":false,"Status":"alive","Url":"https://u:p@example.com/open","Version":2}`,
    );
    expect(await getCallbackUrl(db.kysely, '1', callbackUrl.id)).toEqual(callbackUrl);
  });

  it('allows one primary and one backup per (key, event type); a duplicate is a conflict naming it', async () => {
    await createCallbackUrl(db.kysely, '2', { EventType: 'click', Url: 'https://example.com/a' });
    await createCallbackUrl(db.kysely, '2', { EventType: 'click', Url: 'https://example.com/b', IsBackup: true });
    await createCallbackUrl(db.kysely, '3', { EventType: 'click', Url: 'https://example.com/c' });
    const dup = createCallbackUrl(db.kysely, '2', { EventType: 'click', Url: 'https://example.com/d' });
    await expect(dup).rejects.toThrow(CallbackUrlError);
    await expect(dup).rejects.toMatchObject({ kind: 'conflict', statusCode: 400, message: 'MJ18 A Eventcallbackurl resource with value "click" for EventType already exists.' });
    await expect(createCallbackUrl(db.kysely, '2', { EventType: 'click', Url: 'https://example.com/e', IsBackup: 'true' })).rejects.toMatchObject({
      message: 'MJ18 A Eventcallbackurl resource with value "click" for EventType already exists (backup URL).',
    });
  });

  it('refuses invalid input with the validator`s message', async () => {
    await expect(createCallbackUrl(db.kysely, '2', { EventType: 'open', Url: 'https://example.com' })).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/root URL/) });
    await expect(updateCallbackUrl(db.kysely, '2', '1', { Version: 9 })).rejects.toMatchObject({ kind: 'invalid' });
  });

  it('lists a tenant`s URLs with filters (EventType as name or number) and paging', async () => {
    for (const type of ['sent', 'open', 'bounce']) await createCallbackUrl(db.kysely, '4', { EventType: type, Url: `https://example.com/${type}` });
    await createCallbackUrl(db.kysely, '4', { EventType: 'open', Url: 'https://example.com/open-b', IsBackup: true, Version: 2 });
    const all = await listCallbackUrls(db.kysely, '4', {}, page);
    expect(all.total).toBe(4);
    expect(all.rows.map((r) => r.url)).toEqual(['https://example.com/sent', 'https://example.com/open', 'https://example.com/bounce', 'https://example.com/open-b']);
    expect((await listCallbackUrls(db.kysely, '4', filters({ EventType: '6' }), page)).rows.map((r) => r.url)).toEqual(['https://example.com/open', 'https://example.com/open-b']);
    expect((await listCallbackUrls(db.kysely, '4', filters({ eventtype: 'open', Backup: '1' }), page)).rows.map((r) => r.url)).toEqual(['https://example.com/open-b']);
    expect((await listCallbackUrls(db.kysely, '4', filters({ Version: '2' }), page)).total).toBe(1);
    expect((await listCallbackUrls(db.kysely, '4', filters({ Status: 'dead' }), page)).total).toBe(0);
    const second = await listCallbackUrls(db.kysely, '4', {}, { limit: 2, offset: 2 });
    expect({ urls: second.rows.map((r) => r.url), total: second.total }).toEqual({ urls: ['https://example.com/bounce', 'https://example.com/open-b'], total: 4 });
    const newest = await listCallbackUrls(db.kysely, '4', {}, { limit: 1, offset: 0, descending: true });
    expect(newest.rows.map((r) => r.url)).toEqual(['https://example.com/open-b']);
    expect((await listCallbackUrls(db.kysely, '5', {}, page)).total).toBe(0);
  });

  it('updates with PATCH semantics; a new Url revives a dead URL', async () => {
    const { callbackUrl } = await createCallbackUrl(db.kysely, '6', { EventType: 'spam', Url: 'https://example.com/spam' });
    const v2 = await updateCallbackUrl(db.kysely, '6', callbackUrl.id, { version: '2' });
    expect(v2).toMatchObject({ version: 2, url: 'https://example.com/spam', eventType: 'spam', status: 'alive' });
    await db.kysely.updateTable('callback_urls').set({ status: 'dead', dead_since: new Date(), failing_since: new Date() }).where('id', '=', callbackUrl.id).execute();
    expect(await updateCallbackUrl(db.kysely, '6', callbackUrl.id, { IsBackup: false })).toMatchObject({ status: 'dead' });
    const revived = await updateCallbackUrl(db.kysely, '6', callbackUrl.id, { Url: 'https://example.com/spam-v2' });
    expect(revived).toMatchObject({ status: 'alive', url: 'https://example.com/spam-v2', version: 2, deadSince: null });
    const row = await db.kysely.selectFrom('callback_urls').select(['failing_since', 'dead_since']).where('id', '=', callbackUrl.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ failing_since: null, dead_since: null });
    expect(await updateCallbackUrl(db.kysely, '6', callbackUrl.id, { Status: 'dead' })).toMatchObject({ status: 'dead' });
    expect(await updateCallbackUrl(db.kysely, '6', callbackUrl.id, { Status: 'alive' })).toMatchObject({ status: 'alive' });
  });

  it('refuses an update that would make a duplicate', async () => {
    await createCallbackUrl(db.kysely, '7', { EventType: 'sent', Url: 'https://example.com/s' });
    const { callbackUrl } = await createCallbackUrl(db.kysely, '7', { EventType: 'open', Url: 'https://example.com/o' });
    await expect(updateCallbackUrl(db.kysely, '7', callbackUrl.id, { EventType: 'sent' })).rejects.toMatchObject({
      kind: 'conflict',
      message: 'MJ18 A Eventcallbackurl resource with value "sent" for EventType already exists.',
    });
  });

  it('keeps tenants apart: another key`s URL is not found, not changed, not deleted', async () => {
    const { callbackUrl } = await createCallbackUrl(db.kysely, '8', { EventType: 'unsub', Url: 'https://example.com/u' });
    expect(await getCallbackUrl(db.kysely, '9', callbackUrl.id)).toBeNull();
    expect(await updateCallbackUrl(db.kysely, '9', callbackUrl.id, { Url: 'https://evil.example/x' })).toBeNull();
    expect(await deleteCallbackUrl(db.kysely, '9', callbackUrl.id)).toBe(false);
    expect(await getCallbackUrl(db.kysely, '8', callbackUrl.id)).toMatchObject({ url: 'https://example.com/u' });
  });

  it('deletes, and treats unknown or malformed ids as not found', async () => {
    const { callbackUrl } = await createCallbackUrl(db.kysely, '10', { EventType: 'blocked', Url: 'https://example.com/b' });
    expect(await deleteCallbackUrl(db.kysely, '10', callbackUrl.id)).toBe(true);
    expect(await deleteCallbackUrl(db.kysely, '10', callbackUrl.id)).toBe(false);
    expect(await getCallbackUrl(db.kysely, '10', callbackUrl.id)).toBeNull();
    for (const id of ['abc', '-1', '0', '99999999999999999999', '1.5']) expect(await getCallbackUrl(db.kysely, '10', id)).toBeNull();
  });
});
