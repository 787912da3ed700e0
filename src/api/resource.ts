import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { Database } from '../db/schema.js';
import type { Principal } from '../keys/key-store.js';
import type { Page } from './conventions/paging.js';
import type { RawQuery } from './conventions/params.js';

/**
 * A REST resource under /v3/REST: its name, its query parameters and record fields as zod
 * schemas (they validate requests and document the API), and its list and item handlers. Wire
 * names (Mailjet's PascalCase) live only in the resource's own file.
 */

export type WireRecord = Record<string, unknown>;

export interface ListResult {
  readonly rows: readonly WireRecord[];
  /** Every matching record, not just this page. */
  readonly total: number;
}

export interface RequestContext {
  readonly db: Kysely<Database>;
  readonly principal: Principal;
  /** The raw query string, for item routes that also take filters. */
  readonly rawQuery: RawQuery;
}

export interface ListContext<Q> extends RequestContext {
  readonly query: Q;
  readonly page: Page;
}

export interface ItemRoute {
  /** Path after the resource name, in fastify syntax: ':id' or ':idType/:id'. */
  readonly path: string;
  readonly description: string;
  /** The query parameters the item form reads, if any (the handler parses with it; the docs list it). */
  readonly query?: z.ZodObject;
  /** Records for the path parameters (scoped to the principal); none → 404. */
  find(ctx: RequestContext, params: Readonly<Record<string, string>>): Promise<readonly WireRecord[]>;
}

export interface Resource<S extends z.ZodObject = z.ZodObject> {
  /** Path under /v3/REST, lowercase, e.g. 'statcounters' or 'statistics/link-click'. */
  readonly name: string;
  readonly description: string;
  /** The list's query parameters, paging included (see conventions/paging.ts `listSchema`). */
  readonly query: S;
  /** The record's fields, for the docs. */
  readonly record: z.ZodObject;
  /** Other spellings of parameter names (lowercase → canonical lowercase), e.g. sourceid ← sourceids. */
  readonly aliases?: Readonly<Record<string, string>>;
  /**
   * Parameters Mailjet's references name for this resource that this server does not answer:
   * name → why. A request with one is a 400 naming it, not an answer that silently ignores it.
   */
  readonly unsupported?: Readonly<Record<string, string>>;
  list(ctx: ListContext<z.output<S>>): Promise<ListResult>;
  readonly items?: readonly ItemRoute[];
}

/** Keeps `list`'s query type tied to the schema when a resource is declared. */
export const defineResource = <S extends z.ZodObject>(resource: Resource<S>): Resource<S> => resource;
