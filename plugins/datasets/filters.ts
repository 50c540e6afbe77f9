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
 * (and may refuse) a column name, `isColumn` tells whether the dataset has one; `where` names the
 * request field in errors.
 */
export function compileFilter(text: string, column: (name: string) => DatasetColumn, isColumn: (name: string) => boolean, where: string): RawBuilder<boolean> {
  const { name, operator, raw } = splitFilter(text, isColumn, where);
  const target = column(name);
  if (!FILTER_OPERATORS.includes(operator as FilterOperator)) {
    throw problems.badRequest(`unknown filter operator "${operator}" (use ${FILTER_OPERATORS.join(', ')})`, [{ path: where, message: `unknown operator ${operator}` }]);
  }
  const value = (text: string) => {
    try {
      return parseText(target.type === 'json' ? 'string' : target.type, text);
    } catch (err) {
      if (err instanceof ValueError) throw problems.badRequest(`filter on "${name}": ${err.message}`, [{ path: where, message: err.message }]);
      throw err;
    }
  };
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
 * The column, operator and value of a filter. A column name may itself hold `:`, so the filter is
 * split where a column of the dataset is followed by an operator. Two such splits (columns `k` and
 * `k:ne`, and `k:ne:eq:x`) are a 400: taking either could compare a column the writer did not mean,
 * and a value would choose which. No split at all is split at the first `:`, for the errors to name
 * the unknown column or operator.
 */
function splitFilter(text: string, isColumn: (name: string) => boolean, where: string): { name: string; operator: string; raw: string } {
  const splits: { name: string; operator: string; raw: string }[] = [];
  for (let at = text.indexOf(':'); at !== -1; at = text.indexOf(':', at + 1)) {
    const name = text.slice(0, at);
    const end = text.indexOf(':', at + 1);
    const operator = end === -1 ? text.slice(at + 1) : text.slice(at + 1, end);
    if (isColumn(name) && FILTER_OPERATORS.includes(operator as FilterOperator)) splits.push({ name, operator, raw: end === -1 ? '' : text.slice(end + 1) });
  }
  if (splits.length > 1) {
    const names = splits.map((s) => `"${s.name}"`).join(' or ');
    throw problems.badRequest(`the filter reads two ways: its column may be ${names}`, [{ path: where, message: `ambiguous: the column may be ${names}` }]);
  }
  if (splits.length === 1) return splits[0];
  const [name, operator = '', ...rest] = text.split(':');
  return { name, operator, raw: rest.join(':') };
}

/** A column lookup that answers 400 for an unknown name, naming the request field `where`; `has` tells whether a name is a column. */
export function columnLookup(columns: DatasetColumn[]): ((name: string, where: string) => DatasetColumn) & { has: (name: string) => boolean } {
  const byName = new Map(columns.map((c) => [c.name, c]));
  const lookup = (name: string, where: string) => {
    const found = byName.get(name);
    if (!found) throw problems.badRequest(`unknown column "${name}"`, [{ path: where, message: `unknown column ${name}` }]);
    return found;
  };
  return Object.assign(lookup, { has: (name: string) => byName.has(name) });
}
