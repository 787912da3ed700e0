/**
 * Mailjet bounce / blocked `error` text → message `StateID`
 * (see Mailjet's /messagestate resource).
 */

export interface MessageState {
  readonly id: number;
  readonly name: string;
  /** Mailjet `error_related_to`. */
  readonly relatedTo: string;
  /** Mailjet `error` text, lower case. */
  readonly error: string;
}

function state(id: number, name: string, relatedTo: string, error: string): MessageState {
  return Object.freeze({ id, name, relatedTo, error });
}

export const MESSAGE_STATES: readonly MessageState[] = Object.freeze([
  state(1, 'UserUnknown', 'recipient', 'user unknown'),
  state(2, 'MailboxInactive', 'recipient', 'mailbox inactive'),
  state(3, 'QuotaExceeded', 'recipient', 'quota exceeded'),
  state(4, 'InvalidDomain', 'domain', 'invalid domain'),
  state(5, 'NoMailHost', 'domain', 'no mail host'),
  state(6, 'RelayOrAccessDenied', 'domain', 'relay/access denied'),
  state(7, 'SenderBlocked', 'spam', 'sender blocked'),
  state(8, 'ContentBlocked', 'spam', 'content blocked'),
  state(9, 'PolicyIssue', 'spam', 'policy issue'),
  state(10, 'SystemIssue', 'system', 'system issue'),
  state(11, 'ProtocolIssue', 'system', 'protocol issue'),
  state(12, 'ConnectionIssue', 'system', 'connection issue'),
  state(13, 'GreyListed', 'domain', 'greylisted'),
  state(14, 'PreBlocked', 'mailjet', 'preblocked'),
  state(15, 'DuplicateInCampaign', 'mailjet', 'duplicate in campaign'),
  state(16, 'SpamPreBlocked', 'mailjet', 'spam preblocked'),
  state(17, 'BadOrEmptyTemplate', 'content', 'bad or empty template'),
  state(18, 'ErrorInTemplateLanguage', 'content', 'error in template language'),
  state(19, 'TypoFix', 'domain', 'typofix'),
  state(20, 'BlackListed', 'recipient', 'blacklisted'),
  state(21, 'SpamReporter', 'recipient', 'spam reporter'),
]);

const BY_ERROR: ReadonlyMap<string, MessageState> = new Map(
  MESSAGE_STATES.map((s) => [s.error, s] as const),
);
const BY_ID: ReadonlyMap<number, MessageState> = new Map(
  MESSAGE_STATES.map((s) => [s.id, s] as const),
);

const SPACES_RE = /\s+/g;
const SLASH_RE = / ?\/ ?/g;

/** Collapse whitespace and drop spaces around `/` (input already trimmed and lower-cased). */
function normalizeError(lower: string): string {
  return lower.replace(SPACES_RE, ' ').replace(SLASH_RE, '/');
}

/** Full state for a Mailjet `error` text (case/whitespace-insensitive); unknown → null. */
export function messageState(error: string | undefined): MessageState | null {
  if (error === undefined || error === '') return null;
  // Cheapest lookups first: Mailjet normally sends the exact lower-case text.
  const exact = BY_ERROR.get(error);
  if (exact !== undefined) return exact;
  const lower = error.trim().toLowerCase();
  return BY_ERROR.get(lower) ?? BY_ERROR.get(normalizeError(lower)) ?? null;
}

/** Mailjet `StateID` for a bounce/blocked `error` text; unknown or missing → null. */
export function bounceStateId(error: string | undefined): number | null {
  return messageState(error)?.id ?? null;
}

/** State by `StateID`; unknown → null. */
export function messageStateById(id: number): MessageState | null {
  return BY_ID.get(id) ?? null;
}
