import { sql, type RawBuilder } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import { containsText } from '../../storage/index.ts';
import type { DatasetColumn } from './dataset-store.ts';
import { parseText, ValueError } from './values.ts';

export const FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'contains', 'is_null'] as const;
type FilterOperator = (typeof FILTER_OPERATORS)[number];

const COMPARISON: Record<Exclude<FilterOperator, 'in' | 'contains' | 'is_null'>, string> = { eq: '=', ne: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=' };

/**
 * Compiles one `column:operator:value` filter (the language of `GET /rows` and of row policies)
 * into a condition; `in` takes comma-separated values, `is_null` true or false. `column` resolves
 * (and may refuse) a column name; `where` names the request field in errors.
 */
export function compileFilter(text: string, column: (name: string) => DatasetColumn, where: string): RawBuilder<boolean> {
  const [name, operator, ...rest] = text.split(':');
  const raw = rest.join(':');
  const target = column(name);
  if (!FILTER_OPERATORS.includes(operator as FilterOperator)) {
    throw problems.badRequest(`unknown filter operator "${operator}" (use ${FILTER_OPERATORS.join(', ')})`, [{ path: where, message: `unknown operator ${operator}` }]);
  }
  const value = valueOf(target, where);
  const ref = sql.id(target.name);
  switch (operator as FilterOperator) {
    case 'is_null':
      return raw === 'false' ? sql<boolean>`${ref} is not null` : sql<boolean>`${ref} is null`;
    case 'in':
      return sql<boolean>`${ref} in (${sql.join(raw.split(',').map(value))})`;
    case 'contains':
      return containsText(ref, raw);
    default:
      return sql<boolean>`${ref} ${sql.raw(COMPARISON[operator as keyof typeof COMPARISON])} ${value(raw)}`;
  }
}

/**
 * Compiles "`target` is one of `values`" (a null among them: or is null), each value as its text
 * would be read in a filter. For callers holding a column and values rather than a filter's text (a
 * lookup's keys): nothing is split, so any column name and any value (a `:`, a comma) is exact.
 */
export function compileOneOf(target: DatasetColumn, values: readonly unknown[], where: string): RawBuilder<boolean> {
  const ref = sql.id(target.name);
  const value = valueOf(target, where);
  const given = values.filter((v) => v !== null).map((v) => value(String(v)));
  const parts: RawBuilder<boolean>[] = [];
  if (given.length === 1) parts.push(sql<boolean>`${ref} = ${given[0]}`);
  else if (given.length > 1) parts.push(sql<boolean>`${ref} in (${sql.join(given)})`);
  if (given.length < values.length) parts.push(sql<boolean>`${ref} is null`);
  if (parts.length === 0) return sql<boolean>`1 = 0`;
  return parts.length === 1 ? parts[0] : sql<boolean>`(${sql.join(parts, sql` or `)})`;
}

/** A filter's text as a value of `target`'s type (a json column's as text); 400 naming `where` when it does not fit. */
function valueOf(target: DatasetColumn, where: string): (text: string) => unknown {
  return (text) => {
    try {
      return parseText(target.type === 'json' ? 'string' : target.type, text);
    } catch (err) {
      if (err instanceof ValueError) throw problems.badRequest(`filter on "${target.name}": ${err.message}`, [{ path: where, message: err.message }]);
      throw err;
    }
  };
}

/** A column lookup that answers 400 for an unknown name, naming the request field `where`. */
export function columnLookup(columns: DatasetColumn[]): (name: string, where: string) => DatasetColumn {
  const byName = new Map(columns.map((c) => [c.name, c]));
  return (name, where) => {
    const found = byName.get(name);
    if (!found) throw problems.badRequest(`unknown column "${name}"`, [{ path: where, message: `unknown column ${name}` }]);
    return found;
  };
}
