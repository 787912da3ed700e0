import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { bool, int, text } from './params.js';

/** Limit / Offset / countOnly / Sort, shared by every list (README, The read API). */

const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 10;

const PAGING_PARAMS = {
  Limit: int(0).optional().meta({ description: `Page size: default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT}; 0 means ${MAX_LIMIT}` }),
  Offset: int(0).optional().meta({ description: 'Index of the first record, from 0' }),
  countOnly: bool().optional().meta({ description: 'Count the matching records only: Data is empty, Count and Total hold the count' }),
  Sort: text(300).optional().meta({ description: 'Prop, Prop DESC (also Prop+DESC, lowercase desc), or a comma-separated list' }),
} as const;

export interface Page {
  readonly limit: number;
  readonly offset: number;
  readonly countOnly: boolean;
}

export function pageOf(q: { Limit?: number | undefined; Offset?: number | undefined; countOnly?: boolean | undefined }): Page {
  const limit = q.Limit ?? DEFAULT_LIMIT;
  if (limit > MAX_LIMIT) throw apiErrors.badRequest(`Invalid parameter Limit: must be at most ${MAX_LIMIT} (got ${limit})`);
  return { limit: limit === 0 ? MAX_LIMIT : limit, offset: q.Offset ?? 0, countOnly: q.countOnly ?? false };
}

export const listSchema = <S extends Record<string, z.ZodType<unknown, string | undefined>>>(shape: S) => z.object({ ...PAGING_PARAMS, ...shape });

/** A list's filters without its paging, for an item form that takes the same filters. */
export const itemFilters = <S extends z.ZodRawShape>(list: z.ZodObject<S & typeof PAGING_PARAMS>) =>
  list.omit({ Limit: true, Offset: true, countOnly: true, Sort: true });
