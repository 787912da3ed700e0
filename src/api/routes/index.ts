import type { Resource } from '../resource.js';
import { campaignoverviewResource } from './campaignoverview.js';
import { contactstatisticsResource } from './contactstatistics.js';
import { listrecipientstatisticsResource } from './listrecipientstatistics.js';
import { statcountersResource } from './statcounters.js';
import { statisticsLinkClickResource } from './statistics-link-click.js';
import { statisticsRecipientEspResource } from './statistics-recipient-esp.js';
import { toplinkclickedResource } from './toplinkclicked.js';
import { useragentstatisticsResource } from './useragentstatistics.js';
import { geostatisticsResource } from './geostatistics.js';
import { bouncestatisticsResource } from './bouncestatistics.js';
import { clickstatisticsResource } from './clickstatistics.js';
import { openinformationResource } from './openinformation.js';
import { messageResource } from './message.js';
import { messagehistoryResource } from './messagehistory.js';
import { messagestateResource } from './messagestate.js';

/** Every read-only resource under /v3/REST, in the docs' order. */
export const RESOURCES: readonly Resource[] = [campaignoverviewResource, contactstatisticsResource, listrecipientstatisticsResource, statcountersResource, statisticsLinkClickResource, statisticsRecipientEspResource, toplinkclickedResource, useragentstatisticsResource, bouncestatisticsResource, clickstatisticsResource, openinformationResource, geostatisticsResource, messageResource, messagehistoryResource, messagestateResource] as readonly Resource[];
