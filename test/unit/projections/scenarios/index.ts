import type { Scenario } from '../../../support/projections.js';
import { BOUNCE_SCENARIOS } from './bounces.js';
import { CAMPAIGN_SCENARIOS } from './campaigns.js';
import { ENGAGEMENT_SCENARIOS } from './engagement.js';
import { STATCOUNTERS_SCENARIOS } from './statcounters.js';
import { TRAP_SCENARIOS } from './traps.js';

/** Every read-model scenario: run as pure folds (unit) and through the log and projector (integration). */
export const SCENARIOS: readonly Scenario[] = [...STATCOUNTERS_SCENARIOS, ...TRAP_SCENARIOS, ...BOUNCE_SCENARIOS, ...CAMPAIGN_SCENARIOS, ...ENGAGEMENT_SCENARIOS];
