import { sql, type RawBuilder } from 'kysely';

/**
 * A condition true when `expression`, as text, contains `text` ignoring case, with `%` and `_`
 * taken literally. LIKE with an explicit escape character means the same on SQLite and Postgres.
 */
export function containsText(expression: RawBuilder<unknown>, text: string): RawBuilder<boolean> {
  const pattern = `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<boolean>`lower(cast(${expression} as text)) like ${pattern} escape '\\'`;
}
