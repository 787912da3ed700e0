import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { type CreatedApiKey, createApiKey, credentialKey, KeyVerifier, revokeApiKey } from '../../../src/keys/key-store.js';
import { openMigratedDb } from '../../support/databases.js';
import { queryCounter } from '../../support/query-counter.js';

/** The same credentials asked for at once are verified once: one lookup, one scrypt. */

let db: Db;
let cleanup: () => Promise<void>;
let key: CreatedApiKey;
const lookups = queryCounter();

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
  key = await createApiKey(db.kysely);
});
afterAll(async () => cleanup?.());

describe('KeyVerifier', () => {
  it('checks the same credentials asked at once once, and answers them from its cache after', async () => {
    const verifier = new KeyVerifier(db.kysely.withPlugin(lookups.plugin));
    lookups.reset();
    const answers = await Promise.all(Array.from({ length: 20 }, () => verifier.verify(key.ApiKey, key.SecretKey)));
    expect(answers.every((a) => a?.apiKeyId === String(key.APIKeyID))).toBe(true);
    expect(lookups.count).toBe(1);
    expect(verifier.cached(credentialKey(key.ApiKey, key.SecretKey))?.apiKeyId).toBe(String(key.APIKeyID));
    expect(verifier.cached(credentialKey(key.ApiKey, 'wrong'))).toBeUndefined();
  });

  it('checks different secrets each on their own', async () => {
    const verifier = new KeyVerifier(db.kysely.withPlugin(lookups.plugin));
    lookups.reset();
    const answers = await Promise.all([verifier.verify(key.ApiKey, 'a'), verifier.verify(key.ApiKey, 'b'), verifier.verify(key.ApiKey, key.SecretKey)]);
    expect(answers.map((a) => a?.apiKeyId ?? null)).toEqual([null, null, String(key.APIKeyID)]);
    expect(lookups.count).toBe(3);
  });

  it('answers a check begun before a revocation but does not keep it: the next request is checked again, and refused', async () => {
    const verifier = new KeyVerifier(db.kysely);
    // The check reads the key, then spends ~50 ms hashing; the revocation and its NOTIFY
    // (forget) land meanwhile. Twenty tries, so that some do land inside the check.
    for (let i = 0; i < 20; i++) {
      const fresh = await createApiKey(db.kysely);
      const running = verifier.verify(fresh.ApiKey, fresh.SecretKey);
      await revokeApiKey(db.kysely, fresh.ApiKey);
      verifier.forget();
      await running;
      expect(await verifier.verify(fresh.ApiKey, fresh.SecretKey)).toBeNull();
    }
  });
});
