import { type RawBuilder, sql } from 'kysely';
import { apiErrors } from '../../http/errors.js';

/**
 * `Sort` as clients send it: `Prop`, `Prop DESC`, `Prop+DESC` (a `+` that arrived encoded),
 * lowercase `desc`, `ASC`, and comma lists. Each resource names its sortable properties and
 * the SQL column behind each; a resource's unique key is appended as the last tie-breaker so
 * pages never overlap.
 */

/** Wire property → SQL expression (a column of the resource's query). */
export type Sortable = Readonly<Record<string, RawBuilder<unknown>>>;

const TERM = /^([A-Za-z_][A-Za-z0-9_]*)(?:[\s+]+(asc|desc))?$/i;

export function orderBy(resource: string, sortText: string | undefined, sortable: Sortable, tieBreak: readonly RawBuilder<unknown>[]): RawBuilder<unknown> {
  const terms: RawBuilder<unknown>[] = [];
  if (sortText !== undefined && sortText.trim() !== '') {
    const byLower = new Map(Object.keys(sortable).map((k) => [k.toLowerCase(), k]));
    for (const part of sortText.split(',')) {
      const m = TERM.exec(part.trim());
      const prop = m !== null ? byLower.get((m[1] as string).toLowerCase()) : undefined;
      if (m === null || prop === undefined) {
        const names = Object.keys(sortable);
        throw apiErrors.badRequest(
          `Invalid parameter Sort: "${part.trim()}" is not a sortable property of ${resource}` +
            (names.length > 0 ? `; sort by ${names.join(', ')}, optionally followed by DESC` : '; it cannot be sorted'),
        );
      }
      const desc = (m[2] ?? '').toLowerCase() === 'desc';
      terms.push(desc ? sql`${sortable[prop]} DESC` : sql`${sortable[prop]} ASC`);
    }
  }
  return sql.join([...terms, ...tieBreak]);
}

/**
 * An id column for `ORDER BY`. With `filtered` (a filter was given that an index of the table
 * answers), an expression of it (`+ 0`, which sorts the same), so that the planner cannot walk
 * the id's index looking for the filter's first matches: ids grow with time and the rows of a
 * campaign or a time range are close together, so the walk read the tenant's rows up to the
 * matches (a late campaign: nearly all of them, for a page of 10), where the filter's index
 * reads only the matches, which are then sorted: no more than counting them for `Total` reads.
 * Otherwise the column itself. Unfiltered, its index gives the page at once. With only filters
 * no index answers (a count, a message's status), counting reads the tenant's rows anyway and
 * the walk never reads more, and stops at once when matches are common, where sorting them
 * would read the tenant (10 rows against 20,000 for a page of `Spam=false`).
 */
export function idOrder(column: RawBuilder<unknown>, filtered: boolean): RawBuilder<unknown> {
  return filtered ? sql`(${column} + 0)` : column;
}
