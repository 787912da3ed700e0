import type dns from 'node:dns';
import { Pool, buildConnector } from 'undici';
import { Exchange, failure } from './http-exchange.js';
import { type AllowList, guardedLookup, vetLiteralHost } from './ssrf-guard.js';

/**
 * One POST to a callback URL, bounded in every direction: a single deadline covers connect,
 * TLS, headers and body; at most SNIPPET_BYTES of the answer are kept and at most DRAIN_BYTES
 * read, then the connection is dropped (the answer's side is http-exchange.ts); redirects are
 * answers, never followed; connections are kept alive in a pool per callback URL — per id, not
 * per URL text: callback URLs with the
 * same text (one receiver for every event type) each have their own pool, so a request never
 * waits for a connection that another URL's requests hold — and open only to addresses the
 * SSRF guard vetted.
 */

export interface HttpDeliveryOptions {
  readonly allowList: AllowList;
  /** Connect + TLS + headers + body. */
  readonly deadlineMs: number;
  /** Connections per pool (one callback URL's) at most; unlimited by default (the dispatcher's per-URL caps bound the requests in flight). */
  readonly connectionsPerUrl?: number;
  /** Name resolution (tests swap it to simulate DNS answers). */
  readonly resolve?: typeof dns.lookup;
  /** How often endpoints unused since the last sweep are let go (IDLE_SWEEP_MS by default). */
  readonly idleSweepMs?: number;
}

export interface HttpOutcome {
  /** A 2xx answer. */
  readonly ok: boolean;
  readonly statusCode: number | null;
  readonly latencyMs: number;
  /** Null on success; else timeout, connect_refused, connect_error, dns, ssrf_blocked, tls, connection_reset, redirect, http_status, invalid_url, error. */
  readonly errorClass: string | null;
  readonly snippet: string | null;
  readonly retryAfterMs: number | null;
}

const USER_AGENT = 'mailtally-webhooks/1';

interface Target {
  origin: string;
  path: string;
  hostname: string;
  /** The Authorization header from the URL's credentials, if any. */
  auth: Record<string, string>;
}

/** A URL as requests use it: parsed, with the SSRF guard's verdict on a literal address host, and its pool. */
interface Endpoint extends Target {
  refusal: string | null;
  pool: Pool | null;
}

/** URLs kept parsed and pooled, by their pool key; past this many, the idle ones go, then all (pools closed as their requests end). */
const MAX_ENDPOINTS = 10_000;
/**
 * An endpoint not used between two sweeps this far apart is let go (its pool closed): a URL
 * deleted, dead or quiet stops holding a pool after 5 to 10 minutes (its sockets, kept alive
 * at most a minute, are gone by then anyway).
 */
const IDLE_SWEEP_MS = 5 * 60_000;

interface Kept {
  url: string;
  endpoint: Endpoint | null;
  /** Used since the last sweep. */
  used: boolean;
}

export class HttpDelivery {
  readonly #connect: buildConnector.connector;
  /** Pool key → the URL text it was made for and its endpoint (null: not an http(s) URL). */
  readonly #endpoints = new Map<string, Kept>();
  readonly #sweeper: NodeJS.Timeout;

  constructor(private readonly options: HttpDeliveryOptions) {
    this.#connect = buildConnector({ timeout: Math.min(options.deadlineMs, 10_000), lookup: guardedLookup(options.allowList, options.resolve) });
    this.#sweeper = setInterval(() => this.sweep(), options.idleSweepMs ?? IDLE_SWEEP_MS).unref();
  }

  /** Endpoints kept now (pools of URLs used lately). */
  get endpoints(): number {
    return this.#endpoints.size;
  }

  /** Lets go of the endpoints not used since the last sweep; the others wait for the next. */
  sweep(): void {
    for (const [key, kept] of this.#endpoints) {
      if (kept.used) kept.used = false;
      else {
        this.#endpoints.delete(key);
        void kept.endpoint?.pool?.close().catch(() => {});
      }
    }
  }

  /**
   * `poolKey` names the pool the request uses: the dispatcher gives the callback URL's id, so
   * each URL has its own connections however many share its text (by default, the text).
   */
  post(url: string, headers: Readonly<Record<string, string>>, body: string, poolKey: string = url): Promise<HttpOutcome> {
    const endpoint = this.#endpoint(poolKey, url);
    if (endpoint === null) return Promise.resolve(failure('invalid_url', 0, 'not an http(s) URL'));
    if (endpoint.pool === null) return Promise.resolve(failure('ssrf_blocked', 0, endpoint.refusal ?? 'refused'));
    const flat = ['content-type', 'application/json', 'user-agent', USER_AGENT];
    for (const [k, v] of Object.entries(endpoint.auth)) flat.push(k, v);
    for (const [k, v] of Object.entries(headers)) flat.push(k, v);
    const pool = endpoint.pool;
    return new Promise((resolve) => {
      const exchange = new Exchange(resolve, this.options.deadlineMs);
      try {
        pool.dispatch({ origin: endpoint.origin, path: endpoint.path, method: 'POST', headers: flat, body }, exchange);
      } catch (err) {
        exchange.onResponseError(null, err as Error);
      }
    });
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    const pools = [...this.#endpoints.values()].flatMap((e) => (e.endpoint?.pool != null ? [e.endpoint.pool] : []));
    this.#endpoints.clear();
    await Promise.all(pools.map((p) => p.destroy()));
  }

  #endpoint(key: string, url: string): Endpoint | null {
    const known = this.#endpoints.get(key);
    if (known !== undefined && known.url === url) {
      known.used = true;
      return known.endpoint;
    }
    // A URL whose text changed (a PUT) lets its old pool go as its requests end.
    if (known !== undefined) void known.endpoint?.pool?.close().catch(() => {});
    else if (this.#endpoints.size >= MAX_ENDPOINTS) {
      this.sweep();
      if (this.#endpoints.size >= MAX_ENDPOINTS) {
        for (const e of this.#endpoints.values()) void e.endpoint?.pool?.close().catch(() => {});
        this.#endpoints.clear();
      }
    }
    const split = splitUrl(url);
    const refusal = split === null ? null : literalHostRefusal(split.hostname, this.options.allowList);
    const endpoint = split === null ? null : { ...split, refusal, pool: refusal === null ? this.#pool(split.origin) : null };
    this.#endpoints.set(key, { url, endpoint, used: true });
    return endpoint;
  }

  #pool(origin: string): Pool {
    const o = this.options;
    return new Pool(origin, {
      connections: o.connectionsPerUrl ?? null,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 60_000,
      headersTimeout: o.deadlineMs,
      bodyTimeout: o.deadlineMs,
      connect: this.#connect,
    });
  }
}

function literalHostRefusal(hostname: string, allowList: AllowList): string | null {
  try {
    vetLiteralHost(hostname, allowList);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** origin, path+query, and basic-auth credentials (sent as a header, never in the request line). */
function splitUrl(url: string): Target | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  const auth: Record<string, string> = {};
  if (u.username !== '' || u.password !== '') {
    const user = decodeUserinfo(u.username);
    const pass = decodeUserinfo(u.password);
    auth['authorization'] = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  }
  return { origin: `${u.protocol}//${u.host}`, path: `${u.pathname}${u.search}`, hostname: u.hostname, auth };
}

/** Percent-decoded credentials; a `%` that starts no valid escape is taken as it is (never a throw). */
function decodeUserinfo(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
