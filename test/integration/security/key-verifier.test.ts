import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import { type CreatedApiKey, createApiKey, credentialKey, KeyVerifier } from '../../../src/keys/key-store.js';
import { openMigratedDb } from '../../support/databases.js';

/** The same credentials asked for at once are verified once: one lookup, one scrypt. */

let db: Db;
let cleanup: () => Promise<void>;
let key: CreatedApiKey;
let lookups = 0;
const counting: KyselyPlugin = {
  transformQuery: (args) => {
    lookups += 1;
    return args.node;
  },
  transformResult: async (args) => args.result,
};

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
  key = await createApiKey(db.kysely);
});
afterAll(async () => cleanup?.());

describe('KeyVerifier', () => {
  it('checks the same credentials asked at once once, and answers them from its cache after', async () => {
    const verifier = new KeyVerifier(db.kysely.withPlugin(counting));
    lookups = 0;
    const answers = await Promise.all(Array.from({ length: 20 }, () => verifier.verify(key.ApiKey, key.SecretKey)));
    expect(answers.every((a) => a?.apiKeyId === String(key.APIKeyID))).toBe(true);
    expect(lookups).toBe(1);
    expect(verifier.cached(credentialKey(key.ApiKey, key.SecretKey))?.apiKeyId).toBe(String(key.APIKeyID));
    expect(verifier.cached(credentialKey(key.ApiKey, 'wrong'))).toBeUndefined();
  });

  it('checks different secrets each on their own', async () => {
    const verifier = new KeyVerifier(db.kysely.withPlugin(counting));
    lookups = 0;
    const answers = await Promise.all([verifier.verify(key.ApiKey, 'a'), verifier.verify(key.ApiKey, 'b'), verifier.verify(key.ApiKey, key.SecretKey)]);
    expect(answers.map((a) => a?.apiKeyId ?? null)).toEqual([null, null, String(key.APIKeyID)]);
    expect(lookups).toBe(3);
  });
});
