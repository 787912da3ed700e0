export { ESP_NAMES, OTHER_ESP, espName, recipientDomain } from './esp.js';
export {
  PLATFORMS,
  UA_CACHE_SIZE,
  clearUserAgentCache,
  normalizePlatform,
  parseUserAgent,
  userAgentCacheSize,
} from './user-agent.js';
export type { UserAgentInfo } from './user-agent.js';
export { normalizeQuery, normalizeUrl } from './links.js';
export { MESSAGE_STATES, bounceStateId, messageState, messageStateById } from './bounce-state.js';
export type { MessageState } from './bounce-state.js';
