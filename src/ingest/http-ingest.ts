import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/connect.js';
import type { NewDeadLetter } from '../db/schema.js';
import { type LogEventRow, decodeEventValue } from '../events/decode.js';
import { type AuthFailures, authenticateFirst } from '../http/auth.js';
import { apiErrors } from '../http/errors.js';
import type { KeyVerifier } from '../keys/key-store.js';
import { contentKey } from '../log/dead-letters.js';
import { type BatchOutcome, writeBatch } from './batch-writer.js';
import { type EventArrayItem, eventArrayItems } from './event-array.js';
import { refuseOtherMethods } from '../http/methods.js';

export const MAX_EVENTS_PER_REQUEST = 1000;
/** The largest body POST /v1/events takes, in bytes. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * Bytes of POST /v1/events bodies a process takes in at once, at most: four of the largest (one
 * key at most half of it, beside its other uploads). A body is parsed whole and each of its
 * events on its own, several times its size in memory (bench/README.md has the figures); past
 * this, a request is answered 503 with Retry-After before its body is read, and sent again
 * (`mailtally publish` does) once others are done.
 */
const BODIES_IN_FLIGHT_BYTES = 4 * MAX_BODY_BYTES;

export interface IngestSummary {
  Accepted: number;
  Duplicates: number;
  Rejected: number;
  Errors: { Index: number; Reason: string }[];
}

/** Events POST /v1/events took in this process, by what became of them (/metrics, /status). */
export interface HttpIngestStats {
  stored: number;
  duplicates: number;
  deadLettered: number;
}

/**
 * POST /v1/events: a JSON array of raw events (at most 1000) for the authenticated key.
 * Valid events are appended (duplicates skipped), invalid ones dead-lettered, all in one
 * transaction; the answer says which was which. Returns the counts it keeps.
 */
export function registerHttpIngest(app: FastifyInstance, deps: { db: Db; verifier: KeyVerifier; authFailures?: AuthFailures; bodiesInFlightBytes?: number }): HttpIngestStats {
  const stats: HttpIngestStats = { stored: 0, duplicates: 0, deadLettered: 0 };
  const auth = authenticateFirst(deps.verifier, deps.authFailures, { writes: true, readOnlyMessage: 'This API key is read-only: it may not send events.' });
  refuseOtherMethods(app, '/v1/events', ['POST']);
  // Bytes of the bodies being taken in now: each request holds its declared length (the most a
  // body may be without one) from its start to its answer (or its client going away).
  // One key may hold at most half of it, so the uploads of one tenant (or slow ones of it) never
  // keep every other tenant's out.
  let inFlight = 0;
  const ofKey = new Map<string, number>();
  const held = new WeakMap<object, { key: string; bytes: number }>();
  // Requests whose client went away before they held anything (while their credentials were checked).
  const gone = new WeakSet<object>();
  const release = (req: object) => {
    const h = held.get(req);
    if (h === undefined) {
      gone.add(req);
      return;
    }
    held.delete(req);
    inFlight -= h.bytes;
    const left = (ofKey.get(h.key) ?? 0) - h.bytes;
    if (left > 0) ofKey.set(h.key, left);
    else ofKey.delete(h.key);
  };
  const admit = async (req: FastifyRequest) => {
    await auth.onRequest(req);
    // Gone meanwhile: its abort came before there was anything to let go of, and no answer (nor
    // its release) will come, so it must not take a share it would keep for good.
    if (gone.has(req) || req.raw.destroyed) throw apiErrors.badRequest('The client went away');
    const key = auth.principalOf(req).apiKeyId;
    const declared = Number(req.headers['content-length']);
    const bytes = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, MAX_BODY_BYTES) : MAX_BODY_BYTES;
    const budget = deps.bodiesInFlightBytes ?? BODIES_IN_FLIGHT_BYTES;
    const keyHolds = ofKey.get(key) ?? 0;
    if ((inFlight > 0 && inFlight + bytes > budget) || (keyHolds > 0 && keyHolds + bytes > budget / 2)) {
      throw apiErrors.unavailable('The server is taking in other uploads; nothing of this request was stored: send it again in a moment');
    }
    inFlight += bytes;
    ofKey.set(key, keyHolds + bytes);
    held.set(req, { key, bytes });
  };
  // Credentials are checked before the body is read (up to MAX_BODY_BYTES); the body arrives as
  // text (`jsonText`): each event is parsed on its own (event-array.ts).
  app.post('/v1/events', { bodyLimit: MAX_BODY_BYTES, config: { jsonText: true }, onRequest: admit, onResponse: async (req) => release(req), onRequestAbort: async (req) => release(req) }, async (req, reply) => {
    const principal = auth.principalOf(req);
    if (typeof req.body !== 'string') throw apiErrors.badRequest('Request body must be a JSON array of events');
    const items = eventArrayItems(req.body, MAX_EVENTS_PER_REQUEST);

    const rows: LogEventRow[] = [];
    const rowIndex: number[] = [];
    const letters: NewDeadLetter[] = [];
    const errors: IngestSummary['Errors'] = [];
    // A dead letter keeps the event's own text, as it was sent; the same reject sent again is stored once.
    const deadLetter = (item: EventArrayItem, reason: string): NewDeadLetter => {
      const raw = Buffer.from(item.text);
      return { source: 'http', api_key_id: principal.apiKeyId, reason, raw, message_key: contentKey('http', principal.apiKeyId, raw, reason) };
    };
    for (const [i, item] of items.entries()) {
      const decoded = 'error' in item ? ({ ok: false, reason: item.error } as const) : decodeEventValue(item.value, { apiKeyId: principal.apiKeyId }, item.text);
      if (decoded.ok) {
        rows.push(decoded.row);
        rowIndex.push(i);
      } else {
        letters.push(deadLetter(item, decoded.reason));
        errors.push({ Index: i, Reason: decoded.reason });
      }
    }

    let outcome: BatchOutcome;
    try {
      outcome = await writeBatch(deps.db, rows, letters, (i, reason) => deadLetter(items[rowIndex[i] as number] as EventArrayItem, reason));
    } catch (err) {
      req.log.warn({ err }, 'event log unavailable');
      // Usually nothing was stored; but a connection lost during the row-by-row retry, or before a
      // commit was acknowledged, may have stored some or all. Sending the request again is safe either way.
      throw apiErrors.unavailable('The event log is unavailable; the events may not have been stored. Send them again shortly: any already stored count as Duplicates.');
    }
    for (const [i, reason] of outcome.refused) errors.push({ Index: rowIndex[i] as number, Reason: reason });
    errors.sort((a, b) => a.Index - b.Index);

    // Each event id stored counts once as accepted (its first occurrence); every other stored-or-skipped row is a duplicate.
    const accepted = outcome.inserted;
    const summary: IngestSummary = {
      Accepted: accepted,
      Duplicates: rows.length - outcome.refused.size - accepted,
      Rejected: errors.length,
      Errors: errors,
    };
    stats.stored += summary.Accepted;
    stats.duplicates += summary.Duplicates;
    stats.deadLettered += summary.Rejected;
    return reply.code(200).send(summary);
  });
  return stats;
}
