import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { parseExactJson } from '../../src/events/exact-json.js';
import { WEBHOOK_EVENT_TYPES } from '../../src/events/schema.js';
import { type Behaviour, type Received, WebhookReceiver } from './webhook-receiver.js';

/**
 * The webhook side of an end-to-end test: receivers on loopback that note what they accepted
 * (answered 2xx), one of them able to fail (500s, then refused connections) and recover on the
 * same port, and the ledger that compares what reached each URL — deduped by webhook-id —
 * with what the log says each URL should get.
 *
 * URLs are `/t<tenant>/<type>`: Version 1 URLs name each event by its webhook-id
 * (`msg_<log position>`); Version 2 bodies are arrays, whose events are named by
 * (event, MessageID, time) and counted.
 */

export interface Accepted {
  tenant: string;
  type: string;
  webhookId: string;
  body: string;
}

export type ReceiverMode = 'ok' | 'fail' | 'down';

/** A receiver whose mode can change: `fail` answers 500, `down` refuses connections. */
export class SwitchableReceiver {
  mode: ReceiverMode = 'ok';
  readonly requests: Received[] = [];
  /** Requests answered 500 on purpose. */
  failed = 0;
  #server: WebhookReceiver | null = null;

  private constructor(
    readonly port: number,
    private readonly accepted: Accepted[],
  ) {}

  static async start(accepted: Accepted[]): Promise<SwitchableReceiver> {
    const probe = await WebhookReceiver.start();
    const port = probe.port;
    await probe.close();
    const r = new SwitchableReceiver(port, accepted);
    await r.#listen();
    return r;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  async setMode(mode: ReceiverMode): Promise<void> {
    if (mode === this.mode) return;
    if (mode === 'down') await this.#close();
    else if (this.mode === 'down') await this.#listen();
    this.mode = mode;
  }

  async close(): Promise<void> {
    await this.#close();
  }

  async #listen(): Promise<void> {
    const behaviour: Behaviour = (req) => {
      this.requests.push(req);
      if (this.mode !== 'ok') {
        this.failed += 1;
        return { status: 500, body: 'failing on purpose' };
      }
      const m = /^\/t(\d+)\/(\w+)$/.exec(req.path);
      if (m !== null) this.accepted.push({ tenant: m[1] as string, type: m[2] as string, webhookId: req.webhookId, body: req.body });
      return { status: 200, body: 'ok' };
    };
    this.#server = await WebhookReceiver.start(behaviour, this.port);
  }

  async #close(): Promise<void> {
    const s = this.#server;
    this.#server = null;
    await s?.close();
  }
}

export interface UrlLedger {
  tenant: string;
  type: string;
  version: 1 | 2;
  expected: number;
  delivered: number;
  /** Expected events that did not arrive. */
  missing: number;
  /** Events that arrived but are not this URL's (another tenant's, another type's, unknown). */
  foreign: number;
  /** Events given up by the retry policy (attempts `expired` / `dropped`). */
  givenUp: number;
  /** Requests repeated under a webhook-id already accepted. */
  repeats: number;
}

export async function webhookLedger(
  db: Kysely<Database>,
  urls: readonly { tenant: string; version: 1 | 2 }[],
  accepted: readonly Accepted[],
): Promise<UrlLedger[]> {
  const byUrl = new Map<string, Accepted[]>();
  for (const a of accepted) {
    const k = `${a.tenant}/${a.type}`;
    let list = byUrl.get(k);
    if (list === undefined) byUrl.set(k, (list = []));
    list.push(a);
  }
  const givenUp = await sql<{ api_key_id: string; webhook_id: string; event_count: number; url_type: string }>`
    SELECT a.api_key_id::text AS api_key_id, a.webhook_id, a.event_count, u.event_type AS url_type
    FROM webhook_attempts a JOIN callback_urls u ON u.id = a.url_id
    WHERE a.outcome IN ('expired', 'dropped')`.execute(db);

  const out: UrlLedger[] = [];
  for (const { tenant, version } of urls) {
    const rows = await sql<{ position: string; type: string; message_id: string; event_time: string }>`
      SELECT position::text AS position, type, message_id::text AS message_id, event_time::text AS event_time
      FROM events WHERE api_key_id = ${BigInt(tenant)} AND type IN (${sql.join(WEBHOOK_EVENT_TYPES.map((t) => sql.lit(t)))})`.execute(db);
    for (const type of WEBHOOK_EVENT_TYPES) {
      const mine = rows.rows.filter((r) => r.type === type);
      const got = byUrl.get(`${tenant}/${type}`) ?? [];
      const unique = new Map(got.map((a) => [a.webhookId, a]));
      const lost = givenUp.rows.filter((g) => g.api_key_id === tenant && g.url_type === type);
      const expected = new Map<string, number>();
      const delivered = new Map<string, number>();
      const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
      if (version === 1) {
        for (const r of mine) bump(expected, r.position);
        for (const a of unique.values()) bump(delivered, /^msg_(\d+)$/.exec(a.webhookId)?.[1] ?? `?${a.webhookId}`);
      } else {
        for (const r of mine) bump(expected, `${type}|${r.message_id}|${r.event_time}`);
        for (const a of unique.values()) {
          for (const e of parseExactJson(a.body) as Record<string, unknown>[]) bump(delivered, `${String(e['event'])}|${String(e['MessageID'])}|${String(e['time'])}`);
        }
      }
      let missing = 0;
      let foreign = 0;
      for (const [k, n] of expected) missing += Math.max(0, n - (delivered.get(k) ?? 0));
      for (const [k, n] of delivered) foreign += Math.max(0, n - (expected.get(k) ?? 0));
      out.push({
        tenant,
        type,
        version,
        expected: mine.length,
        delivered: [...delivered.values()].reduce((s, n) => s + n, 0),
        missing,
        foreign,
        givenUp: lost.reduce((s, g) => s + g.event_count, 0),
        repeats: got.length - unique.size,
      });
    }
  }
  return out;
}
