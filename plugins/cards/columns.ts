import { problems } from '../../kernel/plugin-api.ts';
import type { DataColumnType } from '../../storage/index.ts';
import type { DatasetInfo } from '../datasets/public.ts';

export const NUMERIC: DataColumnType[] = ['integer', 'number'];

/** The dataset's column `name`, of one of `types` when given; else a 400 naming `path`. */
export function columnOf(dataset: DatasetInfo, name: string, path: string, types?: DataColumnType[], why?: string) {
  const column = dataset.columns.find((c) => c.name === name);
  if (!column) throw problems.badRequest(`${path}: dataset "${dataset.name}" has no column "${name}"`, [{ path, message: `unknown column ${name}` }]);
  if (types && !types.includes(column.type)) {
    throw problems.badRequest(`${path}: column "${name}" is ${column.type}; ${why ?? `it must be ${types.join(' or ')}`}`, [{ path, message: `${column.type} column, expected ${types.join(' or ')}` }]);
  }
  return column;
}

/** Aggregations of one column that every card offers alike, and how each is written. */
export const AGGREGATIONS = ['count', 'count_distinct', 'sum', 'avg', 'min', 'max'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

/** The aggregate's SQL over an already quoted column (`count` without one: rows). */
export function aggregateSql(aggregation: Aggregation, column: string | null): string {
  if (aggregation === 'count') return column ? `count(${column})` : 'count(*)';
  if (aggregation === 'count_distinct') return `count(distinct ${column})`;
  return `${aggregation}(${column})`;
}

/**
 * Checks an aggregation of a dataset's column: every one but `count` needs a column, `sum` and
 * `avg` a numeric one; problems name `path`, the column's field.
 */
export function checkAggregation(dataset: DatasetInfo, aggregation: Aggregation, column: string | undefined, path: string) {
  if (!column) {
    if (aggregation !== 'count') throw problems.badRequest(`${path}: ${aggregation} needs a column`, [{ path, message: `required for ${aggregation}` }]);
    return;
  }
  columnOf(dataset, column, path, aggregation === 'sum' || aggregation === 'avg' ? NUMERIC : undefined, `${aggregation} needs a numeric column`);
}
