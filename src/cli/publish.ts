import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { MAX_EVENT_BYTES, payloadTextProblem } from '../events/decode.js';
import { deriveEventId } from '../events/event-id.js';
import { parseExactJson, stringifyExactJson } from '../events/exact-json.js';
import { MAX_BODY_BYTES, MAX_EVENTS_PER_REQUEST } from '../ingest/http-ingest.js';
import { connectNats } from '../ingest/nats-connect.js';
import { ensureStream } from '../ingest/nats-stream.js';
import { type JsonLine, lineTenant, openJsonLines, refuseUnknownApiKeyId } from './jsonl.js';
import { isApiKeyId } from '../events/schema.js';
import { CtrlC } from './interrupt.js';
import { startProgress } from './progress.js';

interface PublishSummary {
  Published: number;
  Duplicates: number;
  Skipped: { Line: number; Reason: string }[];
  /** Over HTTP, the first line of the request that failed (the server gone, an answer not 2xx): nothing from it on was sent. */
  StoppedAtLine?: number;
}

/** A publish over HTTP that stopped part-way: what it had sent, and why it stopped. */
class PublishStopped extends Error {
  constructor(
    readonly summary: PublishSummary,
    cause: Error,
  ) {
    super(cause.message, { cause });
  }
}

/**
 * `mailtally publish <file.jsonl>`: a producer. With NATS_URL, one message per event on
 * `<prefix>.<APIKeyID>.<event>` with Nats-Msg-Id = `<APIKeyID>:<EventID>` (EventID derived when
 * absent; the tenant first because the stream dedupes msg ids across tenants); without it,
 * batches to POST /v1/events using MAILTALLY_API_KEY / MAILTALLY_SECRET_KEY.
 */
export async function runPublish(config: Config, path: string, opts: { apiKeyId: string | undefined; url: string | undefined }): Promise<number> {
  if (opts.apiKeyId !== undefined && !isApiKeyId(opts.apiKeyId)) throw new Error('--api-key-id must be a positive 64-bit integer');
  if (config.nats !== null && opts.apiKeyId !== undefined) await refuseUnknownTenant(config, opts.apiKeyId);
  // Over NATS a rerun publishes every event again (the stream's dedupe window is 100 ms); the log stores each once.
  const ctrlC = config.nats !== null ? new CtrlC('publish', 'the log stores each event once; over NATS the rerun counts every event as Published again') : new CtrlC('publish');
  try {
    const summary = config.nats !== null ? await publishToNats(config, path, opts.apiKeyId, ctrlC) : await publishToHttp(config, path, opts.url, ctrlC);
    console.log(JSON.stringify(summary));
    return ctrlC.finish() ?? (summary.Skipped.length > 0 ? 3 : 0);
  } catch (err) {
    if (!(err instanceof PublishStopped)) throw err;
    // What was sent before the failure is stored: the summary says how much, the rerun stores the rest.
    console.log(JSON.stringify(err.summary));
    throw new Error(`${err.message}; lines before ${err.summary.StoppedAtLine} were sent (the summary above counts them): run it again once the server answers, what is stored already counting as Duplicates`, { cause: err });
  } finally {
    ctrlC.dispose();
  }
}

/**
 * Over NATS, events of an APIKeyID that names no key are each dead-lettered by ingest: with
 * DATABASE_URL set, an --api-key-id naming none is refused before anything is sent, as `import`
 * refuses it. (The embedded database belongs to the service that holds it: not looked at.)
 */
async function refuseUnknownTenant(config: Config, apiKeyId: string): Promise<void> {
  if (config.database.kind !== 'postgres') return;
  const db = await connectDb(config.database, { application: 'mailtally:publish' });
  try {
    await refuseUnknownApiKeyId(db.kysely, apiKeyId, '; ingest would dead-letter every event');
  } finally {
    await db.close();
  }
}

async function publishToNats(config: Config, path: string, apiKeyIdFlag: string | undefined, ctrlC: CtrlC): Promise<PublishSummary> {
  const nats = config.nats;
  if (nats === null) throw new Error('NATS_URL is not set');
  const input = openJsonLines(path);
  const nc = await connectNats({ servers: [...nats.servers], name: 'mailtally-publish' });
  // Closed however the run ends: an open connection would keep the process from exiting.
  let progress: ReturnType<typeof startProgress> | null = null;
  const summary: PublishSummary = { Published: 0, Duplicates: 0, Skipped: [] };
  const inFlight = new Set<Promise<void>>();
  try {
    await ensureStream(await jetstreamManager(nc), nats);
    const js = jetstream(nc);
    progress = startProgress('publish', input.size);
    ctrlC.watch();
    // The server's limit on one message (1 MiB unless configured otherwise).
    const maxPayload = nc.info?.max_payload ?? MAX_EVENT_BYTES;
    for await (const line of input.lines) {
      if (ctrlC.stopsReading()) break;
      const target = natsTarget(line, apiKeyIdFlag, nats.subjectPrefix, maxPayload);
      if (!target.ok) {
        summary.Skipped.push({ Line: line.lineNo, Reason: target.reason });
        continue;
      }
      while (inFlight.size >= 256) await Promise.race(inFlight);
      const job = js
        .publish(target.subject, line.text, { msgID: target.msgId })
        .then(
          (ack) => {
            if (ack.duplicate) summary.Duplicates++;
            else summary.Published++;
          },
          // A line the server or the client refuses is reported with the others, and publishing goes on.
          (err: unknown) => {
            summary.Skipped.push({ Line: line.lineNo, Reason: `NATS refused it: ${err instanceof Error ? err.message : String(err)}` });
          },
        )
        .finally(() => inFlight.delete(job));
      inFlight.add(job);
      if ((summary.Published & 1023) === 0) progress.update(input.bytesRead(), { events: summary.Published + summary.Duplicates });
    }
    await Promise.all(inFlight);
  } finally {
    progress?.stop();
    await nc.drain();
  }
  summary.Skipped.sort((a, b) => a.Line - b.Line);
  return summary;
}

type Target = { ok: true; subject: string; msgId: string } | { ok: false; reason: string };

function natsTarget(line: JsonLine, apiKeyIdFlag: string | undefined, prefix: string, maxPayload: number): Target {
  if (line.problem !== undefined) return { ok: false, reason: line.problem };
  const bytes = Buffer.byteLength(line.text);
  if (bytes > maxPayload) return { ok: false, reason: `event is ${bytes} bytes, over the ${maxPayload} bytes the NATS server takes in one message` };
  const problem = payloadTextProblem(line.text);
  if (problem !== null) return { ok: false, reason: problem };
  let value: unknown;
  try {
    value = parseExactJson(line.text);
  } catch {
    return { ok: false, reason: 'not valid JSON' };
  }
  const found = lineTenant(value, apiKeyIdFlag);
  if (!found.ok) return { ok: false, reason: found.reason };
  const tenant = found.id;
  const event = (value as Record<string, unknown>)['event'];
  if (typeof event !== 'string' || !/^[a-z]+$/.test(event)) return { ok: false, reason: 'no valid "event" field' };
  const given = (value as Record<string, unknown>)['EventID'];
  const eventId = typeof given === 'string' && given !== '' ? given : deriveEventId(tenant, value as Record<string, unknown>);
  // JetStream dedupes Nats-Msg-Id across the whole stream; EventIDs are unique per tenant only.
  return { ok: true, subject: `${prefix}.${tenant}.${event}`, msgId: `${tenant}:${headerSafe(eventId)}` };
}

/**
 * An EventID as a header value: as it is, unless it holds a character a NATS header cannot carry
 * (CR, LF or another control character), then a hash of it: any EventID of up to 128 characters
 * is a valid one, and the event is stored under it as it is.
 */
function headerSafe(eventId: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f\u007f]/.test(eventId) ? `sha256:${createHash('sha256').update(eventId).digest('base64url')}` : eventId;
}

/**
 * `--url`, checked before any work: an absolute http(s) URL without credentials (publish
 * authenticates with MAILTALLY_API_KEY / MAILTALLY_SECRET_KEY; fetch refuses a URL that carries
 * them, and its error would print them). The message never repeats what it refuses.
 */
export function checkPublishUrl(url: string): void {
  const u = URL.canParse(url) ? new URL(url) : null;
  if (u === null || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw new Error('--url must be an absolute http(s) URL, e.g. http://127.0.0.1:3000');
  if (u.username !== '' || u.password !== '') throw new Error('--url must not carry credentials: publish signs in with MAILTALLY_API_KEY and MAILTALLY_SECRET_KEY');
}

/** What made fetch fail: its cause's message (`connect ECONNREFUSED 127.0.0.1:3999`), else its code. */
function fetchCause(err: unknown): string {
  const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
  if (!(cause instanceof Error)) return String(cause);
  const code = (cause as NodeJS.ErrnoException).code;
  const said = cause.message !== '' ? cause.message : (code ?? cause.name);
  return code !== undefined && UNTRUSTED_CERTIFICATE.has(code) ? `${said}: the server's certificate is not one Node trusts; name it (or its CA) in NODE_EXTRA_CA_CERTS=<file.pem>` : said;
}

/** TLS errors of a certificate the client does not trust (a self-signed one, say). */
const UNTRUSTED_CERTIFICATE = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY']);

/** Tries of one request that answers 503 (about 30 s in all) before publish gives up. */
const HTTP_ATTEMPTS = 6;

async function publishToHttp(config: Config, path: string, urlFlag: string | undefined, ctrlC: CtrlC): Promise<PublishSummary> {
  const { apiKey, secretKey } = config.client;
  if (apiKey === null || secretKey === null) {
    throw new Error('Without NATS_URL, publish posts to the HTTP ingest: set MAILTALLY_API_KEY and MAILTALLY_SECRET_KEY (the key the embedded service printed at its first start, or one from `mailtally keys create`)');
  }
  const scheme = config.http.tls !== null ? 'https' : 'http';
  const base = urlFlag ?? `${scheme}://${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.http.port}`;
  const endpoint = new URL('/v1/events', base);
  const auth = `Basic ${Buffer.from(`${apiKey}:${secretKey}`).toString('base64')}`;
  const input = openJsonLines(path);
  const progress = startProgress('publish', input.size);
  const summary: PublishSummary = { Published: 0, Duplicates: 0, Skipped: [] };

  let batch: JsonLine[] = [];
  /** Requests the server took (a failure before the first is the whole run's: nothing was sent). */
  let answered = 0;
  // The body's bytes: the brackets and commas, and each event's UTF-8 (its line's bytes).
  let batchBytes = 2;
  const send = async () => {
    const body = `[${batch.map((l) => l.text).join(',')}]`;
    let res: Response;
    // 503: the service's database is away (what it stored, if anything, is a duplicate next time); sent again after a pause.
    for (let attempt = 1; ; attempt++) {
      try {
        res = await fetch(endpoint, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body });
      } catch (err) {
        // fetch says only "fetch failed"; what went wrong is in its cause (--url carries no credentials).
        throw new Error(`publish: cannot reach the HTTP ingest at ${endpoint.href} (${urlFlag !== undefined ? '--url' : 'HOST / PORT'}): ${fetchCause(err)}`, { cause: err });
      }
      if (res.status !== 503 || attempt >= HTTP_ATTEMPTS || stopping.aborted) break;
      await res.arrayBuffer().catch(() => null);
      // Ctrl-C ends the wait: the 503 then stands as the batch's answer.
      await sleep(Math.min(500 * 2 ** attempt, 15_000), undefined, { signal: stopping }).catch(() => null);
    }
    const answer = (await res.json().catch(() => null)) as { Accepted?: number; Duplicates?: number; Errors?: { Index: number; Reason: string }[]; ErrorMessage?: string } | null;
    if (!res.ok || answer === null) throw new Error(`POST /v1/events answered ${res.status}: ${answer?.ErrorMessage ?? res.statusText}`);
    summary.Published += answer.Accepted ?? 0;
    summary.Duplicates += answer.Duplicates ?? 0;
    for (const e of answer.Errors ?? []) summary.Skipped.push({ Line: batch[e.Index]?.lineNo ?? -1, Reason: e.Reason });
    answered++;
    batch = [];
    batchBytes = 2;
    progress.update(input.bytesRead(), { events: summary.Published + summary.Duplicates + summary.Skipped.length });
  };
  const stopping = ctrlC.watch();
  try {
    for await (const line of input.lines) {
      if (ctrlC.stopsReading()) break;
      // Before the parse, as over NATS: one nested deep enough would overflow its stack, and be called invalid JSON.
      const problem = line.problem ?? payloadTextProblem(line.text) ?? undefined;
      if (problem !== undefined) {
        summary.Skipped.push({ Line: line.lineNo, Reason: problem });
        continue;
      }
      try {
        stringifyExactJson(parseExactJson(line.text));
      } catch {
        summary.Skipped.push({ Line: line.lineNo, Reason: 'not valid JSON' });
        continue;
      }
      const bytes = line.bytes.length + 1;
      if (bytes + 2 > MAX_BODY_BYTES) {
        summary.Skipped.push({ Line: line.lineNo, Reason: `event is larger than the ${MAX_BODY_BYTES} bytes POST /v1/events takes` });
        continue;
      }
      if (batch.length > 0 && batchBytes + bytes > MAX_BODY_BYTES) await send();
      batch.push(line);
      batchBytes += bytes;
      if (batch.length >= MAX_EVENTS_PER_REQUEST) await send();
    }
    if (batch.length > 0) await send();
  } catch (err) {
    if (answered === 0 || batch.length === 0 || !(err instanceof Error)) throw err;
    summary.Skipped.sort((a, b) => a.Line - b.Line);
    throw new PublishStopped({ ...summary, StoppedAtLine: batch[0]?.lineNo ?? 0 }, err);
  } finally {
    progress.stop();
  }
  // A request's rejects come after the lines skipped while it was gathered: in line order again.
  summary.Skipped.sort((a, b) => a.Line - b.Line);
  return summary;
}
