import { bounceStatistics } from './bounce-statistics.js';
import { campaignOverview } from './campaign-overview.js';
import { clickStatistics } from './click-statistics.js';
import { contactStatistics } from './contact-statistics.js';
import { geo } from './geo.js';
import type { Projection } from './kit/types.js';
import { linkClicks } from './link-clicks.js';
import { listRecipientStatistics } from './list-recipient-statistics.js';
import { messages } from './messages.js';
import { openInformation } from './open-information.js';
import { recipientEsp } from './recipient-esp.js';
import { statcounters } from './statcounters.js';
import { userAgents } from './user-agents.js';

/** Every read model the projector keeps, by name. */
export const PROJECTIONS: readonly Projection[] = [
  statcounters,
  campaignOverview,
  contactStatistics,
  listRecipientStatistics,
  recipientEsp,
  linkClicks,
  userAgents,
  geo,
  clickStatistics,
  bounceStatistics,
  openInformation,
  messages,
];

export function findProjection(name: string): Projection | undefined {
  return PROJECTIONS.find((p) => p.name === name);
}

export type { Projection } from './kit/types.js';
