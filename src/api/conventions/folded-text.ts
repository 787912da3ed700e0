import { type RawBuilder, sql } from 'kysely';

/**
 * A filter's text, case-folded the way `lower(column)` folds a read model's text column: those
 * columns are `COLLATE "C"`, under which `lower` folds A–Z only. Folding the value in SQL the same
 * way (not with JavaScript's toLowerCase, which folds all of Unicode) means a value always
 * matches the text it repeats exactly, `Écoutez` or `Élodie@Boutique.fr` included, whatever the
 * database's default collation; ASCII letters match in any case.
 */
export function foldedText(value: string): RawBuilder<string> {
  return sql<string>`lower(${value}::text COLLATE "C")`;
}
