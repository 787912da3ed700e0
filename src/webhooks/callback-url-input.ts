import { WEBHOOK_EVENT_TYPES } from '../events/schema.js';

/**
 * Validation of eventcallbackurl input, as pure functions: property names matched without
 * regard to case, numbers and booleans also as strings (Mailjet's clients send `"Version":"2"`,
 * `isBackup: 'false'`), every problem worded for the person who sent it.
 */

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
export type CallbackUrlStatus = 'alive' | 'dead';
export type CallbackUrlVersion = 1 | 2;

/** node-mailjet's `EventTypeValue` numbering, accepted wherever an EventType is. */
const EVENT_TYPE_NUMBERS: Readonly<Record<number, WebhookEventType>> = {
  1: 'click',
  2: 'bounce',
  3: 'spam',
  4: 'blocked',
  5: 'unsub',
  6: 'open',
  7: 'sent',
};

export interface CallbackUrlCreate {
  eventType: WebhookEventType;
  url: string;
  isBackup: boolean;
  status: CallbackUrlStatus;
  version: CallbackUrlVersion;
}

export type CallbackUrlPatch = Partial<CallbackUrlCreate>;

export interface CallbackUrlFilters {
  eventType?: WebhookEventType;
  status?: CallbackUrlStatus;
  isBackup?: boolean;
  version?: CallbackUrlVersion;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const MAX_URL_LENGTH = 2048;
/** Wire properties a body may carry; the read-only ones are accepted and ignored. */
const WRITABLE = ['EventType', 'Url', 'IsBackup', 'Status', 'Version'] as const;
const READ_ONLY = ['ID', 'APIKeyID', 'APIKey'];

export function checkEventType(v: unknown): Checked<WebhookEventType> {
  const text = typeof v === 'number' || typeof v === 'bigint' ? String(v) : typeof v === 'string' ? v.trim().toLowerCase() : null;
  if (text !== null) {
    if (/^\d+$/.test(text)) {
      const named = EVENT_TYPE_NUMBERS[Number(text)];
      if (named !== undefined) return { ok: true, value: named };
    } else {
      const name = text === 'unsubscribe' ? 'unsub' : text;
      if ((WEBHOOK_EVENT_TYPES as readonly string[]).includes(name)) return { ok: true, value: name as WebhookEventType };
    }
  }
  return { ok: false, message: `EventType must be one of ${WEBHOOK_EVENT_TYPES.join(', ')} (or 1-7), got ${show(v)}` };
}

function checkBoolean(name: string, v: unknown): Checked<boolean> {
  if (typeof v === 'boolean') return { ok: true, value: v };
  const text = typeof v === 'number' ? String(v) : typeof v === 'string' ? v.trim().toLowerCase() : null;
  if (text === 'true' || text === '1') return { ok: true, value: true };
  if (text === 'false' || text === '0') return { ok: true, value: false };
  return { ok: false, message: `${name} must be true or false, got ${show(v)}` };
}

function checkVersion(v: unknown): Checked<CallbackUrlVersion> {
  const text = typeof v === 'number' || typeof v === 'bigint' ? String(v) : typeof v === 'string' ? v.trim() : null;
  if (text === '1' || text === '2') return { ok: true, value: Number(text) as CallbackUrlVersion };
  return { ok: false, message: `Version must be 1 (one event per request) or 2 (grouped events), got ${show(v)}` };
}

function checkStatus(v: unknown): Checked<CallbackUrlStatus> {
  const text = typeof v === 'string' ? v.trim().toLowerCase() : null;
  if (text === 'alive' || text === 'dead') return { ok: true, value: text };
  return { ok: false, message: `Status must be alive or dead, got ${show(v)}` };
}

/**
 * An absolute http(s) URL with a path beyond `/` (a root URL is refused, as Mailjet does). It
 * may carry basic-auth credentials (`https://user:pass@host/path`), sent as an Authorization header.
 */
export function checkCallbackUrl(v: unknown): Checked<string> {
  if (typeof v !== 'string' || v.trim() === '') return { ok: false, message: `Url must be an absolute http or https URL, got ${show(v)}` };
  const text = v.trim();
  if (text.length > MAX_URL_LENGTH) return { ok: false, message: `Url is longer than ${MAX_URL_LENGTH} characters` };
  // The URL parser would quietly drop tabs and line breaks and read `\` as `/`: the URL stored
  // and shown would not be the one requested. Such URLs are refused, as is `http:host/path`.
  if (/[\s\p{Cc}]/u.test(text)) return { ok: false, message: `Url must not contain spaces or control characters (percent-encode them, e.g. %20), got ${show(v)}` };
  if (text.includes('\\')) return { ok: false, message: `Url must not contain a backslash (percent-encode it as %5C), got ${show(v)}` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    // The parser refuses a port past 65535 as it refuses any malformed URL: say which it is.
    const port = /^https?:\/\/(?:[^/?#@]*@)?(?:\[[^\]]*\]|[^/?#:]*):(\d+)(?:[/?#]|$)/i.exec(text)?.[1];
    if (port !== undefined && Number(port) > 65535) return { ok: false, message: `Url's port must be between 1 and 65535, got ${show(v)}` };
    return { ok: false, message: `Url must be an absolute http or https URL, got ${show(v)}` };
  }
  // Spelled so, the scheme is http or https (`http:host/path` parses too, but is not spelled so).
  if (!/^https?:\/\//i.test(text)) return { ok: false, message: `Url must start with http:// or https://, got ${show(v)}` };
  if (url.hostname === '') return { ok: false, message: `Url has no host: ${show(v)}` };
  if (url.port === '0') return { ok: false, message: `Url's port must be between 1 and 65535, got ${show(v)}` };
  if (url.pathname === '/' || url.pathname === '') {
    return { ok: false, message: `Url must not be a root URL: give a path after the host, e.g. ${url.protocol}//${url.host}/mailjet/events` };
  }
  return { ok: true, value: text };
}

/** Property name → value, matched without regard to case; unknown names are refused. */
function fields(body: unknown): Checked<Map<(typeof WRITABLE)[number], unknown>> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { ok: false, message: 'The request body must be a JSON object, e.g. {"EventType":"open","Url":"https://example.com/hooks/open"}' };
  }
  const out = new Map<(typeof WRITABLE)[number], unknown>();
  for (const [key, value] of Object.entries(body)) {
    const lower = key.toLowerCase();
    const name = WRITABLE.find((w) => w.toLowerCase() === lower);
    if (name !== undefined) {
      if (out.has(name)) return { ok: false, message: `Property ${name} is given twice` };
      out.set(name, value);
    } else if (!READ_ONLY.some((r) => r.toLowerCase() === lower)) {
      return { ok: false, message: `Unknown property "${key}"; an eventcallbackurl has ${WRITABLE.join(', ')}` };
    }
  }
  return { ok: true, value: out };
}

export function parseCallbackUrlPatch(body: unknown): Checked<CallbackUrlPatch> {
  const given = fields(body);
  if (!given.ok) return given;
  const patch: CallbackUrlPatch = {};
  const problems: string[] = [];
  const take = <T>(checked: Checked<T>, set: (v: T) => void) => (checked.ok ? set(checked.value) : problems.push(checked.message));
  for (const [name, value] of given.value) {
    if (name === 'EventType') take(checkEventType(value), (v) => (patch.eventType = v));
    else if (name === 'Url') take(checkCallbackUrl(value), (v) => (patch.url = v));
    else if (name === 'IsBackup') take(checkBoolean('IsBackup', value), (v) => (patch.isBackup = v));
    else if (name === 'Status') take(checkStatus(value), (v) => (patch.status = v));
    else take(checkVersion(value), (v) => (patch.version = v));
  }
  return problems.length > 0 ? { ok: false, message: problems.join('; ') } : { ok: true, value: patch };
}

export function parseCallbackUrlCreate(body: unknown): Checked<CallbackUrlCreate> {
  const patch = parseCallbackUrlPatch(body);
  if (!patch.ok) return patch;
  const p = patch.value;
  const missing = [p.url === undefined && 'Url', p.eventType === undefined && 'EventType'].filter((m): m is string => m !== false);
  if (p.url === undefined || p.eventType === undefined) return { ok: false, message: `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required` };
  return { ok: true, value: { eventType: p.eventType, url: p.url, isBackup: p.isBackup ?? false, status: p.status ?? 'alive', version: p.version ?? 1 } };
}

/**
 * List filters from a query string: `EventType` (name or number), `Status`, `Backup` (or
 * `IsBackup`), `Version`. Other parameters (Limit, Offset, Sort, unknown ones) are not filters
 * and are left to the caller.
 */
export function parseCallbackUrlFilters(query: Readonly<Record<string, unknown>>): Checked<CallbackUrlFilters> {
  const filters: CallbackUrlFilters = {};
  const problems: string[] = [];
  for (const [key, raw] of Object.entries(query)) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value === undefined || value === '') continue;
    const lower = key.toLowerCase();
    const take = <T>(checked: Checked<T>, set: (v: T) => void) => (checked.ok ? set(checked.value) : problems.push(checked.message));
    if (lower === 'eventtype') take(checkEventType(value), (v) => (filters.eventType = v));
    else if (lower === 'status') take(checkStatus(value), (v) => (filters.status = v));
    else if (lower === 'backup' || lower === 'isbackup') take(checkBoolean(key, value), (v) => (filters.isBackup = v));
    else if (lower === 'version') take(checkVersion(value), (v) => (filters.version = v));
  }
  return problems.length > 0 ? { ok: false, message: problems.join('; ') } : { ok: true, value: filters };
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);
  if (typeof v === 'bigint') return v.toString();
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? 'an array' : 'an object';
}
