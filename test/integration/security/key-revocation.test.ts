import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreatedApiKey, KeyVerifier, createApiKey, listApiKeys, revokeApiKey } from '../../../src/keys/key-store.js';
import type { Service } from '../../../src/main.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { type TestEnv, createTestEnv, waitFor, startHttpService } from '../../support/harness.js';

/**
 * `keys revoke`: a revoked key no longer authenticates — in a running service at once (the
 * revocation's NOTIFY makes every process forget the checks it keeps for a minute), on every
 * route that takes Basic auth, cached answers included — while the other keys go on working.
 */

describe.each(DIALECTS)('revokeApiKey on %s', (dialect) => {
  it('revokes by APIKeyID or by public key, once, and says when there is no such key', async () => {
    const { db, cleanup } = await openMigratedDb(dialect);
    try {
      const a = await createApiKey(db.kysely);
      const b = await createApiKey(db.kysely, { readOnly: true });
      const verifier = new KeyVerifier(db.kysely, 0);
      expect(await verifier.verify(a.ApiKey, a.SecretKey)).toEqual({ apiKeyId: a.APIKeyID, readOnly: false });

      const byId = await revokeApiKey(db.kysely, a.APIKeyID);
      expect(byId).toMatchObject({ APIKeyID: a.APIKeyID, ApiKey: a.ApiKey, ReadOnly: false, RevokedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
      expect(await verifier.verify(a.ApiKey, a.SecretKey)).toBeNull();
      // Again, by its public key: nothing changes.
      expect(await revokeApiKey(db.kysely, a.ApiKey)).toEqual(byId);

      const byKey = await revokeApiKey(db.kysely, b.ApiKey);
      expect(byKey).toMatchObject({ APIKeyID: b.APIKeyID, ReadOnly: true, RevokedAt: expect.any(String) });
      for (const none of ['999999', '9223372036854775808', '00000000000000000000000000000000', '']) expect(await revokeApiKey(db.kysely, none)).toBeNull();

      const listed = await listApiKeys(db.kysely);
      expect(listed.map((k) => [k.APIKeyID, k.RevokedAt !== null])).toEqual([
        [a.APIKeyID, true],
        [b.APIKeyID, true],
      ]);
      expect(Object.keys(listed[0] ?? {})).toEqual(['APIKeyID', 'ApiKey', 'ReadOnly', 'CreatedAt', 'RevokedAt']);
    } finally {
      await cleanup();
    }
  });
});

describe('a key revoked while the service runs', () => {
  let t: TestEnv;
  let service: Service;
  let app: FastifyInstance;
  let other: CreatedApiKey;

  beforeAll(async () => {
    t = await createTestEnv({ API_RATE_LIMIT: '0' });
    other = await createApiKey(t.db.kysely);
    ({ service, app } = await startHttpService(t, ['api', 'ingest']));
  });

  afterAll(async () => {
    await service?.stop();
    await t?.cleanup();
  });

  const auth = (key: CreatedApiKey) => `Basic ${Buffer.from(`${key.ApiKey}:${key.SecretKey}`).toString('base64')}`;
  const status = async (key: CreatedApiKey, method: 'GET' | 'POST', url: string, payload?: string) =>
    (await app.inject({ method, url, headers: { authorization: auth(key), ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(payload !== undefined ? { payload } : {}) })).statusCode;
  const statcounters = '/v3/REST/statcounters?CounterSource=APIKey&CounterTiming=Message&CounterResolution=Lifetime';

  it('stops authenticating at once, cached answers included, and the other keys go on', async () => {
    // Verified, and its answer cached.
    expect(await status(t.key, 'GET', statcounters)).toBe(200);
    expect(await status(t.key, 'GET', statcounters)).toBe(200);
    expect(await status(t.key, 'GET', '/v1/webhooks/attempts')).toBe(200);
    expect(await status(other, 'GET', statcounters)).toBe(200);

    await revokeApiKey(t.db.kysely, t.key.APIKeyID);
    // The checks are kept for a minute; the NOTIFY must end them well before.
    await waitFor('the revoked key refused', async () => (await status(t.key, 'GET', statcounters)) === 401, 5000, 50);
    expect(await status(t.key, 'GET', '/v3/REST/eventcallbackurl')).toBe(401);
    expect(await status(t.key, 'GET', '/v1/webhooks/attempts')).toBe(401);
    expect(await status(t.key, 'POST', '/v1/events', JSON.stringify([{ event: 'sent', time: 1_700_000_000, MessageID: 1, email: 'a@example.com' }]))).toBe(401);
    expect(await status(other, 'GET', statcounters)).toBe(200);
  });

  it("is heard however the key is revoked: by an operator's own SQL, or by deleting it", async () => {
    const bySql = await createApiKey(t.db.kysely);
    const deleted = await createApiKey(t.db.kysely);
    expect([await status(bySql, 'GET', statcounters), await status(deleted, 'GET', statcounters)]).toEqual([200, 200]);
    await sql`UPDATE api_keys SET revoked_at = now() WHERE api_key_id = ${bySql.APIKeyID}::int8`.execute(t.db.kysely);
    await sql`DELETE FROM api_keys WHERE api_key_id = ${deleted.APIKeyID}::int8`.execute(t.db.kysely);
    await waitFor('both keys refused', async () => (await status(bySql, 'GET', statcounters)) === 401 && (await status(deleted, 'GET', statcounters)) === 401, 5000, 50);
    expect(await status(other, 'GET', statcounters)).toBe(200);
  });
});
