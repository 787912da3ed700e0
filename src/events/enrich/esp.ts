/**
 * Recipient-domain → ESP (mailbox provider) classification.
 *
 * Pure and allocation-light: called once per ingested event.
 */

/** Providers matched on the exact domain only. */
const EXACT: ReadonlyMap<string, string> = new Map<string, string>([
  ['gmail.com', 'Gmail'],
  ['googlemail.com', 'Gmail'],
  ['msn.com', 'Outlook'],
  ['ymail.com', 'Yahoo'],
  ['rocketmail.com', 'Yahoo'],
  ['icloud.com', 'Apple'],
  ['me.com', 'Apple'],
  ['mac.com', 'Apple'],
  ['web.de', 'Web.de'],
  ['orange.fr', 'Orange'],
  ['wanadoo.fr', 'Orange'],
  ['free.fr', 'Free'],
  ['sfr.fr', 'SFR'],
  ['neuf.fr', 'SFR'],
  ['mail.ru', 'Mail.ru'],
  ['inbox.ru', 'Mail.ru'],
  ['list.ru', 'Mail.ru'],
  ['bk.ru', 'Mail.ru'],
  ['zoho.com', 'Zoho'],
  ['zohomail.com', 'Zoho'],
  ['proton.me', 'Proton'],
  ['protonmail.com', 'Proton'],
  ['protonmail.ch', 'Proton'],
  ['pm.me', 'Proton'],
  ['comcast.net', 'Comcast'],
  ['laposte.net', 'La Poste'],
  ['t-online.de', 'T-Online'],
  ['libero.it', 'Libero'],
  ['qq.com', 'QQ'],
  ['163.com', '163'],
  ['naver.com', 'Naver'],
]);

/**
 * Providers matched as `<brand>.<suffix>` where suffix is a public-suffix-like
 * 1–2 short labels (`com`, `fr`, `co.uk`, `com.au`, ...).
 */
const BRANDS: ReadonlyMap<string, string> = new Map<string, string>([
  ['outlook', 'Outlook'],
  ['hotmail', 'Outlook'],
  ['live', 'Outlook'],
  ['yahoo', 'Yahoo'],
  ['aol', 'Yahoo'],
  ['gmx', 'GMX'],
  ['yandex', 'Yandex'],
]);

const SUFFIX_RE = /^[a-z]{2,3}(?:\.[a-z]{2,3})?$/;
const TRAILING_DOTS_RE = /\.+$/;

/** Name used for every domain that is not a known provider. */
export const OTHER_ESP = 'others';

/** Every name {@link espName} can return, biggest providers first, `others` last. */
export const ESP_NAMES: readonly string[] = Object.freeze([
  'Gmail', 'Outlook', 'Yahoo', 'Apple',
  'GMX', 'Web.de', 'Orange', 'Free', 'SFR', 'La Poste', 'T-Online', 'Libero',
  'Yandex', 'Mail.ru', 'Zoho', 'Proton', 'Comcast', 'QQ', '163', 'Naver',
  OTHER_ESP,
]);

function cleanDomain(raw: string): string {
  let d = raw.trim().toLowerCase();
  if (d.endsWith('.')) d = d.replace(TRAILING_DOTS_RE, '');
  return d;
}

/** Lower-cased domain part after the last `@`, trimmed, without trailing dot; `''` if none. */
export function recipientDomain(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 0) return '';
  return cleanDomain(email.slice(at + 1));
}

/** Classify a recipient domain into an ESP name (see {@link ESP_NAMES}); unknown → `others`. */
export function espName(domain: string): string {
  // Fast path: recipientDomain() output is already clean.
  const direct = EXACT.get(domain);
  if (direct !== undefined) return direct;
  const d = cleanDomain(domain);
  if (d === '') return OTHER_ESP;
  const exact = EXACT.get(d);
  if (exact !== undefined) return exact;
  const dot = d.indexOf('.');
  if (dot <= 0) return OTHER_ESP;
  const brand = BRANDS.get(d.slice(0, dot));
  if (brand !== undefined && SUFFIX_RE.test(d.slice(dot + 1))) return brand;
  return OTHER_ESP;
}
