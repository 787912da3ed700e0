import { readFileSync } from 'node:fs';
import { STATUS_CODES } from 'node:http';
import net, { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Server as NodeHttpServer } from 'node:http';
import type https from 'node:https';
import Fastify, { LogController, type FastifyHttpOptions, type FastifyHttpsOptions, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { isDatabaseAway, isStatementTimeout } from '../db/errors.js';
import { parseExactJson } from '../events/exact-json.js';
import { nestedDeeperThan } from '../events/json-text.js';
import { type Logger, LogThrottle } from '../logger.js';
import { ApiError, apiErrors, envelope } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route parses its JSON body itself: the body parser hands it the checked text. */
    jsonText?: boolean;
  }
}

const DEFAULT_BODY_LIMIT = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Arrays and objects inside each other: no request needs more, and deeper ones overflow recursive code (copies, hashes) later. */
const MAX_JSON_DEPTH = 64;

/**
 * The HTTP server every role shares: TLS when configured (plain HTTP only on loopback unless the
 * operator allows it), JSON bodies parsed with 64-bit integers kept exact, and every error —
 * ours, fastify's, or an unexpected one — answered in Mailjet's envelope without internals.
 */
export function createServer(http: Config['http'], log: Logger): FastifyInstance {
  const answerError = errorHandler();
  assertTransportAllowed(http);
  const options: FastifyHttpOptions<NodeHttpServer> = {
    loggerInstance: log,
    bodyLimit: DEFAULT_BODY_LIMIT,
    // Behind proxies, the client's address (failed logins are counted per address) is the one
    // they name; otherwise the socket's peer.
    trustProxy: http.trustProxy === false ? false : [...http.trustProxy],
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true },
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // A request must arrive whole (headers and body) within the timeout: a client trickling a
    // large body would otherwise hold its connection, and a shutdown, for as long as it likes.
    // Node answers it through clientErrorHandler (a 408 in the envelope) and closes the socket.
    requestTimeout: http.requestTimeoutMs,
    http: requestTimeoutOptions(http.requestTimeoutMs),
    // Errors fastify answers before any route (a path that is not valid percent-encoding…) and
    // requests Node cannot parse leave in the envelope too; neither logs the request's bytes.
    frameworkErrors: (err, req, reply) => answerError(err, req, reply),
    clientErrorHandler: (err, socket) => answerClientError(err, socket, log),
  };
  // An HTTPS fastify differs from the plain one only in its server type; routes are the same.
  const app: FastifyInstance =
    http.tls !== null
      ? (Fastify({
          ...options,
          https: { cert: readFileSync(http.tls.certFile), key: readFileSync(http.tls.keyFile), ...requestTimeoutOptions(http.requestTimeoutMs) },
        } as unknown as FastifyHttpsOptions<https.Server>) as unknown as FastifyInstance)
      : Fastify(options);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    // Compressed bytes would otherwise be called "not valid UTF-8".
    const coding = (req.headers['content-encoding'] ?? '').trim();
    if (coding !== '' && coding.toLowerCase() !== 'identity') return done(apiErrors.unsupportedEncoding(coding), undefined);
    let text: string;
    try {
      // Fatal: bytes that are not UTF-8 are refused, never silently replaced by U+FFFD.
      text = typeof body === 'string' ? body : utf8.decode(body);
    } catch {
      return done(apiErrors.badRequest('Request body is not valid UTF-8'), undefined);
    }
    if (text.trim() === '') return done(null, undefined);
    // A route that parses its body itself (POST /v1/events: each event on its own, its depth
    // too, so that one event nested too deep is that event's reject) gets the text.
    if (req.routeOptions.config?.jsonText === true) return done(null, text);
    if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
      return done(apiErrors.badRequest(`Request body is nested deeper than ${MAX_JSON_DEPTH} levels`), undefined);
    }
    try {
      done(null, parseExactJson(text));
    } catch (err) {
      done(apiErrors.badRequest(`Request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`), undefined);
    }
  });

  app.setNotFoundHandler((req, reply) => {
    // RFC 9110 §15.6.2: a method the server does not implement at all (PROPFIND, LOCK, …).
    if (!app.supportedMethods.includes(req.method)) {
      void reply.code(501).send(envelope(501, `Method ${req.method} is not implemented by this server; the API takes GET, HEAD, POST, PUT and DELETE`));
      return;
    }
    void reply.code(404).send(envelope(404, `Unknown resource: ${req.method} ${req.url.split('?')[0]}`));
  });

  app.setErrorHandler(answerError);
  return app;
}

/**
 * Fails, naming PORT and HOST, when the server could not listen there (a port in use or
 * privileged, an address not on this host), so a process finds out before its database work.
 */
export async function assertCanListen(http: Pick<Config['http'], 'port' | 'host'>): Promise<void> {
  if (http.port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err) => reject(listenError(http, err)));
    probe.listen({ port: http.port, host: http.host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

export function listenError(http: Pick<Config['http'], 'port' | 'host'>, err: unknown): Error {
  return new Error(`PORT / HOST: cannot listen on ${http.host} port ${http.port}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/**
 * Node looks for requests past their timeout every `connectionsCheckingInterval` (30 s by
 * default): a tenth of the timeout lets it fire close to its time; headers have no longer.
 */
function requestTimeoutOptions(timeoutMs: number): { connectionsCheckingInterval: number; headersTimeout: number } {
  return { connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(timeoutMs / 10))), headersTimeout: Math.min(60_000, timeoutMs) };
}

/**
 * Stops taking requests and waits for those in flight, for at most `graceMs`: then their
 * connections are closed (a client trickling a body must not hold the shutdown).
 */
export async function closeServer(app: FastifyInstance, graceMs: number): Promise<void> {
  const deadline = setTimeout(() => {
    app.log.warn('shutting down: closing the HTTP connections of requests still in flight');
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(deadline);
  }
}

/**
 * The server's error handler: errors in Mailjet's envelope; a 5xx logged with its error, but
 * requests answered 503 because the database is away, which one line every 10 s says, not one
 * each (a flood while it restarts).
 */
function errorHandler(): (err: unknown, req: FastifyRequest, reply: FastifyReply) => void {
  const unavailableLog = new LogThrottle(10_000);
  return (err, req, reply) => {
    const e = toApiError(err);
    if (e.statusCode === 503 && databaseAway(err)) {
      if (unavailableLog.take()) {
        req.log.warn({ url: req.url, cause: err instanceof Error ? err.message : String(err), alsoAnswered503Since: unavailableLog.suppressed }, 'request answered 503: the database is unavailable');
      }
    } else if (e.statusCode >= 500 && !(err instanceof ApiError && e.statusCode === 503)) {
      // A 503 thrown on purpose (busy, the log away) is said where it is thrown, if at all.
      req.log.error({ err, url: req.url }, 'request failed');
    }
    void reply
      .code(e.statusCode)
      .headers(e.headers)
      .send(envelope(e.statusCode, e.message));
  };
}

/** A request Node's HTTP parser refused (bad request line, headers too large, timeout). */
function answerClientError(err: Error & { code?: string }, socket: Duplex, log: Logger): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const message = status === 408 ? 'Request timed out' : status === 431 ? 'Request headers are too large' : 'Malformed HTTP request';
  // The error's rawPacket holds the request's bytes, credentials included: only its code is logged.
  log.debug({ code: err.code }, 'malformed HTTP request');
  const body = JSON.stringify(envelope(status, message));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** A database error that says the database is away for now (down, restarting, its connection lost). */
function databaseAway(err: unknown): boolean {
  if (err instanceof ApiError || isStatementTimeout(err)) return false;
  return isDatabaseAway(err);
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { statusCode?: number; code?: string; message?: string };
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return apiErrors.payloadTooLarge();
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return apiErrors.unsupportedMediaType();
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError(e.statusCode, e.message ?? 'Bad request');
  }
  // No Retry-After: the same request a second later would most likely take as long again.
  if (isStatementTimeout(err)) return new ApiError(503, "The request's database work took longer than this server allows (its statement timeout); narrow it (a shorter time range, more filters, a smaller Limit) or try again later");
  if (databaseAway(err)) return apiErrors.unavailable();
  return apiErrors.internal();
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '[::1]';
}

function assertTransportAllowed(http: Config['http']): void {
  if (http.tls === null && !isLoopback(http.host) && !http.allowInsecureHttp) {
    throw new Error(
      `Refusing to serve plain HTTP on ${http.host}: credentials would cross the network in clear. ` +
        'Set TLS_CERT and TLS_KEY, bind HOST to 127.0.0.1, or set ALLOW_INSECURE_HTTP=true when a TLS-terminating proxy is in front.',
    );
  }
}
