import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Which APIKeyIDs exist, for NATS ingest (subjects name the tenant; events for a tenant that
 * does not exist are dead-lettered). Known ids are cached; a batch naming an unknown id reloads
 * the list first (one small query), so a key created a moment ago is never mistaken for none.
 */
export class TenantDirectory {
  #known = new Set<string>();

  constructor(private readonly db: Kysely<Database>) {}

  async ensureLoaded(ids: Iterable<string>): Promise<void> {
    for (const id of ids) {
      if (this.#known.has(id)) continue;
      const rows = await this.db.selectFrom('api_keys').select('api_key_id').execute();
      this.#known = new Set(rows.map((r) => r.api_key_id.toString()));
      return;
    }
  }

  knows(apiKeyId: string): boolean {
    return this.#known.has(apiKeyId);
  }
}
