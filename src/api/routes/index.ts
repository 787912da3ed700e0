import type { Resource } from '../resource.js';
import { statcountersResource } from './statcounters.js';

/** Every read-only resource under /v3/REST, in the docs' order. */
export const RESOURCES: readonly Resource[] = [statcountersResource] as readonly Resource[];
