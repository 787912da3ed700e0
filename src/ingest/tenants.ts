import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Which APIKeyIDs exist, for NATS ingest (subjects name the tenant; events for a tenant that
 * does not exist are dead-lettered). Known ids are cached; an unknown id triggers a reload,
 * at most once per `minReloadMs`, so a key created a moment ago is picked up.
 */
export class TenantDirectory {
  #known = new Set<string>();
  #lastLoad = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly minReloadMs = 1000,
  ) {}

  async ensureLoaded(ids: Iterable<string>): Promise<void> {
    for (const id of ids) {
      if (this.#known.has(id)) continue;
      if (Date.now() - this.#lastLoad < this.minReloadMs) return;
      const rows = await this.db.selectFrom('api_keys').select('api_key_id').execute();
      this.#known = new Set(rows.map((r) => r.api_key_id.toString()));
      this.#lastLoad = Date.now();
      return;
    }
  }

  knows(apiKeyId: string): boolean {
    return this.#known.has(apiKeyId);
  }
}
