import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Which APIKeyIDs exist, for NATS ingest and `import` (subjects and lines name the tenant; events
 * for a tenant that does not exist are dead-lettered). Known ids are cached; a batch naming an
 * unknown id reloads the list first (one small query), so a key created a moment ago is never
 * mistaken for none; and so does the first batch after `maxAgeMs` (NATS ingest, which runs for
 * good, asks `knowsNow`, false past that age), so a key whose row was deleted is no tenant any
 * more within a minute, as its cached credential checks end (src/keys/). `import` loads the list
 * per batch and asks `knows`, so a batch is never judged by a list that aged while it was read.
 */
export class TenantDirectory {
  #known = new Set<string>();
  #loadedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly maxAgeMs = 60_000,
  ) {}

  async ensureLoaded(ids: Iterable<string>): Promise<void> {
    const stale = Date.now() - this.#loadedAt >= this.maxAgeMs;
    for (const id of ids) {
      if (!stale && this.#known.has(id)) continue;
      this.#loadedAt = Date.now();
      const rows = await this.db.selectFrom('api_keys').select('api_key_id').execute();
      this.#known = new Set(rows.map((r) => r.api_key_id.toString()));
      return;
    }
  }

  /** Whether `apiKeyId` is a tenant, by the list last loaded (`ensureLoaded` first). */
  knows(apiKeyId: string): boolean {
    return this.#known.has(apiKeyId);
  }

  /** Whether `apiKeyId` is a tenant by a list at most `maxAgeMs` old (false with an older one: reload it first). */
  knowsNow(apiKeyId: string): boolean {
    return Date.now() - this.#loadedAt < this.maxAgeMs && this.#known.has(apiKeyId);
  }
}
