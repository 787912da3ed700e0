/**
 * The vocabularies the event generator draws from, with rough real-world weights: recipient
 * domains, user agents (opens are dominated by image proxies and Apple Mail, clicks by
 * browsers), countries, SMTP replies and failure reasons.
 */

export type Weighted<T> = readonly (readonly [T, number])[];

export const DOMAINS: Weighted<string> = [
  ['gmail.com', 34], ['outlook.com', 6], ['hotmail.com', 6], ['live.com', 2], ['yahoo.com', 7], ['yahoo.fr', 1],
  ['aol.com', 1], ['icloud.com', 6], ['me.com', 1], ['orange.fr', 3], ['free.fr', 2], ['sfr.fr', 1], ['laposte.net', 1],
  ['gmx.de', 2], ['web.de', 2], ['t-online.de', 1], ['libero.it', 1], ['comcast.net', 1], ['mail.ru', 1], ['proton.me', 1],
  ['hotmail.co.uk', 1], ['yahoo.co.uk', 1],
];
/** Share of recipients at a company domain (`<word>-<n>.com`, classified `others`). */
export const CORPORATE_SHARE = 0.2;
export const WORDS = [
  'acme', 'globex', 'initech', 'umbrella', 'stark', 'wayne', 'wonka', 'tyrell', 'cyberdyne', 'hooli', 'vandelay', 'soylent',
  'nakatomi', 'oscorp', 'gringotts', 'monarch', 'paper', 'vehement', 'massive', 'dunder',
];
export const FIRST_NAMES = ['anna', 'louis', 'marie', 'john', 'sofia', 'lucas', 'emma', 'noah', 'li', 'yuki', 'omar', 'fatima', 'paul', 'ines', 'jan', 'eva'];
export const LAST_NAMES = ['martin', 'smith', 'muller', 'rossi', 'garcia', 'dubois', 'schmidt', 'kowalski', 'tanaka', 'silva', 'nguyen', 'brown'];

const IOS = ['16_7_8', '17_4_1', '17_5_1', '17_6', '18_0', '18_1'];
const CHROME = ['124.0.0.0', '126.0.0.0', '128.0.0.0', '130.0.0.0'];
const WIN = 'Windows NT 10.0; Win64; x64';

/** Agents of `open` events: proxies and mail apps. */
export const OPEN_AGENTS: Weighted<string> = [
  ['Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', 34],
  ['YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html', 6],
  ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)', 14],
  ...IOS.map((v) => [`Mozilla/5.0 (iPhone; CPU iPhone OS ${v} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148`, 4] as const),
  ['Mozilla/5.0 (iPad; CPU OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148', 2],
  ['Mozilla/4.0 (compatible; ms-office; MSOffice 16)', 5],
  ['Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17328; Pro)', 3],
  ['Outlook-iOS/723.4027091.prod.iphone (4.2406.0)', 2],
  ['Outlook-Android/2.0', 1],
  [`Mozilla/5.0 (${WIN}; rv:115.0) Gecko/20100101 Thunderbird/115.12.2`, 1],
  ['Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP2A.240705.005; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/126.0.6478.122 Mobile Safari/537.36', 2],
  ['Mozilla/5.0 (Linux; Android 13; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36', 1],
];

/** Agents of `click` (and browser `unsub`) events: real browsers. */
export const BROWSER_AGENTS: Weighted<string> = [
  ...CHROME.map((v) => [`Mozilla/5.0 (${WIN}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${v} Safari/537.36`, 6] as const),
  ...CHROME.map((v) => [`Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${v} Safari/537.36`, 2] as const),
  ...CHROME.map((v) => [`Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${v} Mobile Safari/537.36`, 4] as const),
  ...IOS.map((v) => [`Mozilla/5.0 (iPhone; CPU iPhone OS ${v} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1`, 3] as const),
  ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15', 5],
  [`Mozilla/5.0 (${WIN}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0`, 5],
  [`Mozilla/5.0 (${WIN}; rv:127.0) Gecko/20100101 Firefox/127.0`, 3],
  ['Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0', 1],
  ['Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', 1],
  ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1', 1],
];

export const GEOS: Weighted<string> = [
  ['US', 30], ['FR', 18], ['DE', 12], ['GB', 9], ['ES', 5], ['IT', 5], ['NL', 3], ['BE', 3], ['CA', 3], ['BR', 2], ['IN', 2], ['JP', 1], ['', 7],
];

export const SENT_REPLIES: readonly string[] = [
  'sent (250 2.0.0 OK 1793491948 fa5si855896wjc.199 - gsmtp)',
  'sent (250 2.0.0 OK)',
  'sent (250 ok dirdel)',
  'sent (250 2.0.0 Ok: queued as 4XkQ2b6Wz1z9t)',
];

/** error_related_to, error, weight; bounces also get a hard/soft flag and an SMTP comment. */
export const FAILURES: Weighted<readonly [string, string]> = [
  [['recipient', 'user unknown'], 40], [['recipient', 'mailbox inactive'], 10], [['recipient', 'quota exceeded'], 8],
  [['domain', 'invalid domain'], 6], [['domain', 'no mail host'], 6], [['spam', 'sender blocked'], 5], [['spam', 'content blocked'], 4],
  [['system', 'connection issue'], 6], [['mailjet', 'preblocked'], 8], [['recipient', 'blacklisted'], 7],
];

export const BOUNCE_COMMENT = '550 5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient\'s email address for typos.';
export const DEFER_REPLY = '451 4.7.1 Greylisted, please try again in 300 seconds';

/** Paths of the links in campaign bodies. */
export const LINK_PATHS = ['', 'shop', 'shop/new-arrivals', 'blog/2026/11/winter-guide', 'account/preferences', 'p/12345', 'sale', 'events/webinar'];
