import { isApiKeyId } from '../events/schema.js';

export type ParsedSubject = { ok: true; apiKeyId: string; event: string } | { ok: false; reason: string };

/** `<prefix>.<APIKeyID>.<event>` → its tenant and event type. */
export function parseSubject(subject: string, prefix: string): ParsedSubject {
  const rest = subject.startsWith(`${prefix}.`) ? subject.slice(prefix.length + 1).split('.') : [];
  const [apiKeyId, event] = rest;
  if (rest.length !== 2 || apiKeyId === undefined || event === undefined || !isApiKeyId(apiKeyId)) {
    return { ok: false, reason: `subject ${subject} is not ${prefix}.<APIKeyID>.<event>` };
  }
  return { ok: true, apiKeyId, event };
}

/** parseSubject with the answers kept: a stream has few distinct subjects (tenants × event types). */
export class SubjectParser {
  readonly #cache = new Map<string, ParsedSubject>();

  constructor(
    private readonly prefix: string,
    private readonly capacity = 10_000,
  ) {}

  parse(subject: string): ParsedSubject {
    let parsed = this.#cache.get(subject);
    if (parsed === undefined) {
      parsed = parseSubject(subject, this.prefix);
      if (this.#cache.size >= this.capacity) this.#cache.clear();
      this.#cache.set(subject, parsed);
    }
    return parsed;
  }
}
