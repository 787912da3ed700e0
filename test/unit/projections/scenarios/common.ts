/**
 * Shared vocabulary of the read-model scenarios: a day that starts on a UTC midnight, user agents
 * whose parse is known, and a maker of raw events for one message with fixed dimensions.
 * Every expected value in the scenarios is written by hand from the definitions in
 * projections/README.md.
 */

/** 2023-11-15T00:00:00Z. */
export const D0 = 1_700_006_400;
export const HOUR = 3600;
export const DAY = 86_400;

/** Apple Mail on iOS → platform 'iOS', client 'Apple Mail'. */
export const UA_MAIL = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148';
/** Gmail's image proxy → platform 'Other', client 'Gmail Image Proxy'. */
export const UA_PROXY = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)';
/** Chrome on Windows → platform 'Windows', client 'Chrome'. */
export const UA_CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';

/**
 * Stable ids (first 48 bits of SHA-256 of the text, plus one), computed once outside the code
 * under test and pasted here.
 */
export const UA_ID = {
  mail: '138769454783143', // 'ua:iOS\0Apple Mail'
  proxy: '157750879223076', // 'ua:Other\0Gmail Image Proxy'
  chrome: '49287273522068', // 'ua:Windows\0Chrome'
} as const;
export const LINK_ID = {
  sale: '122180314152761', // 'url:https://shop.example.com/sale?a=1&b=2'
  about: '237234168949788', // 'url:https://shop.example.com/about'
} as const;

/** Raw events of one message: `m('open', 'o1', D0 + 60, { agent })`. */
export function message(messageId: string, dims: Record<string, unknown>) {
  return (event: string, eventId: string, time: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    event,
    EventID: eventId,
    time,
    MessageID: messageId,
    ...dims,
    ...extra,
  });
}
