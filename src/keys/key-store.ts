import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import { stringifyExactJson } from '../events/exact-json.js';
import { isApiKeyId } from '../events/schema.js';

/**
 * API keys: a public key, a secret stored only as a scrypt hash, a numeric APIKeyID (the tenant)
 * and a read-only flag. Mailjet's clients send them as HTTP Basic user and password.
 */

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number }) => Promise<Buffer>;
const PARAMS = { N: 16_384, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;

export interface CreatedApiKey {
  APIKeyID: string;
  ApiKey: string;
  SecretKey: string;
  ReadOnly: boolean;
}

export interface Principal {
  apiKeyId: string;
  readOnly: boolean;
}

async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(secret, salt, KEY_LENGTH, PARAMS);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || salt === undefined || hash === undefined) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scryptAsync(secret, Buffer.from(salt, 'base64'), expected.length, { N: Number(n), r: Number(r), p: Number(p) });
  return timingSafeEqual(actual, expected);
}

export async function createApiKey(db: Kysely<Database>, opts: { readOnly?: boolean } = {}): Promise<CreatedApiKey> {
  const publicKey = randomBytes(16).toString('hex');
  const secret = randomBytes(16).toString('hex');
  const readOnly = opts.readOnly ?? false;
  const row = await db
    .insertInto('api_keys')
    .values({ public_key: publicKey, secret_hash: await hashSecret(secret), read_only: readOnly })
    .returning('api_key_id')
    .executeTakeFirstOrThrow();
  return { APIKeyID: row.api_key_id.toString(), ApiKey: publicKey, SecretKey: secret, ReadOnly: readOnly };
}

/** The one-line JSON `keys create` prints, with APIKeyID as a bare integer like every id. */
export function printableKey(key: CreatedApiKey): string {
  return stringifyExactJson({ APIKeyID: BigInt(key.APIKeyID), ApiKey: key.ApiKey, SecretKey: key.SecretKey, ReadOnly: key.ReadOnly });
}

/** A key as `keys list` and `keys revoke` show it: never its secret (only its hash is kept). */
export interface ApiKeyInfo {
  APIKeyID: string;
  ApiKey: string;
  ReadOnly: boolean;
  CreatedAt: string;
  /** Null while the key is in use. */
  RevokedAt: string | null;
}

/** NOTIFY sent as a key is revoked or deleted (migration 0008): every process that checks credentials forgets those it verified. */
export const KEYS_CHANNEL = 'mailtally_keys';

const INFO_COLUMNS = ['api_key_id', 'public_key', 'read_only', 'created_at', 'revoked_at'] as const;

function info(r: { api_key_id: bigint | string; public_key: string; read_only: boolean; created_at: Date | string; revoked_at: Date | string | null }): ApiKeyInfo {
  const iso = (t: Date | string) => new Date(t).toISOString();
  return { APIKeyID: r.api_key_id.toString(), ApiKey: r.public_key, ReadOnly: r.read_only, CreatedAt: iso(r.created_at), RevokedAt: r.revoked_at === null ? null : iso(r.revoked_at) };
}

/** One line of `keys list` / `keys revoke`, with APIKeyID as a bare integer. */
export function printableInfo(key: ApiKeyInfo): string {
  return stringifyExactJson({ ...key, APIKeyID: BigInt(key.APIKeyID) });
}

export async function listApiKeys(db: Kysely<Database>): Promise<ApiKeyInfo[]> {
  return (await db.selectFrom('api_keys').select(INFO_COLUMNS).orderBy('api_key_id').execute()).map(info);
}

/**
 * Revokes a key, named by its APIKeyID or its public key: it no longer authenticates. Its
 * tenant's data, callback URLs and events arriving over NATS are kept. Revoking a revoked key
 * changes nothing (its RevokedAt stays); null: no such key. Setting `revoked_at` sends the
 * NOTIFY on KEYS_CHANNEL with the commit (a trigger, migration 0008), so running processes stop
 * accepting the key at once.
 */
export async function revokeApiKey(db: Kysely<Database>, key: string): Promise<ApiKeyInfo | null> {
  const byId = isApiKeyId(key);
  const row = await db
    .updateTable('api_keys')
    .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', sql<Date>`now()`) }))
    .where(byId ? 'api_key_id' : 'public_key', '=', byId ? BigInt(key) : key)
    .returning(INFO_COLUMNS)
    .executeTakeFirst();
  return row === undefined ? null : info(row);
}

export async function countApiKeys(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('api_keys').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Checks Basic credentials. Verified pairs are remembered for `ttlMs` (keyed by a hash of the
 * secret, never the secret) so that scrypt does not dominate every request; failures are not
 * cached. A revoked key stops working at once where the revocation's NOTIFY is heard
 * (`forget`), and when its entry expires otherwise.
 */
export class KeyVerifier {
  readonly #cache = new Map<string, { principal: Principal; expires: number }>();
  /** Checks running, by credentials: the same credentials asked again meanwhile share one. */
  readonly #running = new Map<string, Promise<Principal | null>>();
  /** Bumped by forget(): a check that began before it does not keep its answer. */
  #generation = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly ttlMs = 60_000,
    private readonly maxEntries = 10_000,
  ) {}

  /** The tenant of credentials (`credentialKey`) verified within the last `ttlMs`, without a lookup or a hash. */
  cached(credentials: string): Principal | undefined {
    const hit = this.#cache.get(credentials);
    return hit !== undefined && hit.expires > Date.now() ? hit.principal : undefined;
  }

  async verify(publicKey: string, secret: string): Promise<Principal | null> {
    const key = credentialKey(publicKey, secret);
    const hit = this.#cache.get(key);
    if (hit !== undefined && hit.expires > Date.now()) return hit.principal;
    const running = this.#running.get(key);
    if (running !== undefined) return running;
    const check = this.#check(key, publicKey, secret).finally(() => this.#running.delete(key));
    this.#running.set(key, check);
    return check;
  }

  /**
   * Whether these credentials were verified in this process since the last revocation it heard
   * of, their entry expired or not (until the cache is full and cleared): the failed-login limit
   * lets them be checked again rather than refusing them (src/http/auth.ts).
   */
  proven(credentials: string): boolean {
    return this.#cache.has(credentials);
  }

  /** Drops every verified pair (a key was revoked: see KEYS_CHANNEL); the next request of each is checked again. */
  forget(): void {
    this.#generation += 1;
    this.#cache.clear();
    this.#running.clear();
  }

  async #check(key: string, publicKey: string, secret: string): Promise<Principal | null> {
    const generation = this.#generation;
    // Postgres text cannot hold U+0000: such a key is no key (asking would be a database error).
    const row = publicKey.includes('\u0000')
      ? undefined
      : await this.db
          .selectFrom('api_keys')
          .select(['api_key_id', 'secret_hash', 'read_only'])
          .where('public_key', '=', publicKey)
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
    // Unknown keys still pay for one hash, so timing does not tell which public keys exist.
    const ok = await verifySecret(secret, row?.secret_hash ?? DUMMY_HASH);
    if (row === undefined || !ok) return null;

    const principal = { apiKeyId: row.api_key_id.toString(), readOnly: row.read_only };
    // Read before a revocation was heard of: answer this request, but do not keep it.
    if (generation !== this.#generation) return principal;
    if (this.#cache.size >= this.maxEntries) this.#cache.clear();
    this.#cache.set(key, { principal, expires: Date.now() + this.ttlMs });
    return principal;
  }
}

/** Credentials as a map key: the public key and a hash of the secret (never the secret itself). */
export function credentialKey(publicKey: string, secret: string): string {
  return `${publicKey}:${createHash('sha256').update(secret).digest('base64')}`;
}

const DUMMY_HASH = `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEY_LENGTH).toString('base64')}`;
