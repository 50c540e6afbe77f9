import type { DatasetInfo } from '../datasets/public.ts';
import type { CardSql } from './public.ts';

/** One value a dashboard filter narrows to, already typed for the column. */
export type FilterValue = string | number | boolean | null;

/**
 * A dashboard's filters as the viewer set them: column name → the values one of which a row must
 * hold (several values of one column: any of them).
 */
export type ActiveFilters = ReadonlyMap<string, { parse(dataset: DatasetInfo): FilterValue[] }>;

/** A quoted identifier, the same in both dialects: `"` doubled inside. */
export const quoteIdentifier = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * The text of one governed SELECT written by a card type, and the values it binds: every value a
 * `$n`, every name quoted, each dataset read through `from` narrowed by the filters on its columns.
 */
export class CardStatement implements CardSql {
  readonly params: FilterValue[] = [];

  constructor(
    private readonly filters: ActiveFilters,
    private readonly secondsBetweenSql: (earlier: string, later: string) => string,
  ) {}

  from(dataset: DatasetInfo): string {
    const conditions: string[] = [];
    for (const column of dataset.columns) {
      const filter = this.filters.get(column.name);
      // A JSON value is not compared for equality: a filter does not narrow a json column.
      if (!filter || column.type === 'json') continue;
      const values = filter.parse(dataset);
      const nonNull = values.filter((v) => v !== null);
      const tests = [];
      if (nonNull.length) tests.push(`${quoteIdentifier(column.name)} in (${nonNull.map((v) => this.value(v)).join(', ')})`);
      if (nonNull.length < values.length) tests.push(`${quoteIdentifier(column.name)} is null`);
      conditions.push(`(${tests.join(' or ')})`);
    }
    const where = conditions.length ? ` where ${conditions.join(' and ')}` : '';
    return `(select * from ${quoteIdentifier(dataset.name)}${where}) as src`;
  }

  id(name: string): string {
    return quoteIdentifier(name);
  }

  value(value: FilterValue): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  secondsBetween(earlier: string, later: string): string {
    return this.secondsBetweenSql(earlier, later);
  }
}
