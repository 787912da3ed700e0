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
