import type { Dispatcher } from 'undici';
import type { HttpOutcome } from './http-delivery.js';
import { parseRetryAfter } from './retry-policy.js';
import { SsrfError } from './ssrf-guard.js';

/**
 * One request's exchange with a callback URL, as undici hands it over: the outcome it gives,
 * the caps on the answer, the error classes (http-delivery.ts makes the request).
 */

/** Bytes of an answer kept for the attempt's record. */
export const SNIPPET_BYTES = 4096;
/** Bytes of an answer read at most; past them the connection is dropped. */
export const DRAIN_BYTES = 64 * 1024;

class DeadlineError extends Error {
  constructor() {
    super('deadline exceeded');
    this.name = 'DeadlineError';
  }
}

export function failure(errorClass: string, latencyMs: number, message: string): HttpOutcome {
  return { ok: false, statusCode: null, latencyMs, errorClass, snippet: message.slice(0, 500), retryAfterMs: null };
}

/**
 * One request's answer, taken as undici hands it over (no stream): the status decides the
 * outcome; the body is kept up to SNIPPET_BYTES and the exchange cut past DRAIN_BYTES; the
 * deadline resolves the outcome at once and aborts whatever is still going on.
 */
export class Exchange implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | null = null;
  #status = 0;
  #retryAfter: string | string[] | undefined;
  readonly #kept: Buffer[] = [];
  #keptBytes = 0;
  #total = 0;
  #done = false;
  #timedOut = false;
  readonly #started = performance.now();
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly resolve: (o: HttpOutcome) => void,
    deadlineMs: number,
  ) {
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      // Headers came: the status stands, only the body was slow. Otherwise it is a timeout.
      if (this.#status > 0) this.#finish();
      else this.#fail(new DeadlineError());
      this.#controller?.abort(new DeadlineError());
    }, deadlineMs);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#done) controller.abort(new DeadlineError());
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.#status = statusCode;
    this.#retryAfter = headers['retry-after'];
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#total += chunk.length;
    if (this.#keptBytes < SNIPPET_BYTES) {
      const part = chunk.subarray(0, SNIPPET_BYTES - this.#keptBytes);
      this.#kept.push(part);
      this.#keptBytes += part.length;
    }
    if (this.#total > DRAIN_BYTES) {
      this.#finish();
      controller.abort(new Error('answer too long'));
    }
  }

  onResponseEnd(): void {
    this.#finish();
  }

  onResponseError(_c: Dispatcher.DispatchController | null, err: Error): void {
    if (this.#status > 0) this.#finish();
    else this.#fail(err);
  }

  #latency(): number {
    return Math.round(performance.now() - this.#started);
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    clearTimeout(this.#timer);
    const status = this.#status;
    const ok = status >= 200 && status < 300;
    const snippet = this.#keptBytes === 0 ? null : Buffer.concat(this.#kept).toString('utf8').replace(/\uFFFD+$/, '');
    this.resolve({
      ok,
      statusCode: status,
      latencyMs: this.#latency(),
      errorClass: ok ? null : status >= 300 && status < 400 ? 'redirect' : 'http_status',
      snippet,
      retryAfterMs: ok ? null : parseRetryAfter(this.#retryAfter),
    });
  }

  #fail(err: Error): void {
    if (this.#done) return;
    this.#done = true;
    clearTimeout(this.#timer);
    this.resolve(failure(classify(err, this.#timedOut), this.#latency(), describe(err, this.#timedOut)));
  }
}

function causes(err: unknown): { code?: unknown; name?: unknown; message?: unknown }[] {
  const out: { code?: unknown; name?: unknown; message?: unknown }[] = [];
  let e: unknown = err;
  for (let i = 0; i < 5 && e !== null && typeof e === 'object'; i++) {
    out.push(e as { code?: unknown });
    e = (e as { cause?: unknown }).cause;
  }
  return out;
}

function classify(err: unknown, timedOut: boolean): string {
  if (timedOut || err instanceof DeadlineError) return 'timeout';
  const chain = causes(err);
  const codes = chain.map((c) => String(c.code ?? ''));
  const has = (...names: string[]) => codes.some((c) => names.includes(c));
  if (err instanceof SsrfError || has('ERR_WEBHOOK_SSRF')) return 'ssrf_blocked';
  if (has('UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT')) return 'timeout';
  if (has('ECONNREFUSED')) return 'connect_refused';
  if (has('ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME')) return 'dns';
  if (codes.some((c) => c.startsWith('ERR_TLS') || c.startsWith('ERR_SSL') || c.includes('CERT'))) return 'tls';
  if (has('ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED')) return 'connection_reset';
  if (has('EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL')) return 'connect_error';
  return 'error';
}

function describe(err: unknown, timedOut: boolean): string {
  if (timedOut || err instanceof DeadlineError) return 'no complete answer before the deadline';
  const chain = causes(err);
  const msg = chain.map((c) => (typeof c.message === 'string' ? c.message : '')).find((m) => m !== '');
  return msg ?? String(err);
}
