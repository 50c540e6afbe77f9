import { sql, type RawBuilder } from 'kysely';
import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import type { DataColumnType } from '../../storage/index.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { columnOf, identity, outputName, tableOf, uniqueNames } from './columns.ts';

const FUNCTIONS = ['count', 'count_distinct', 'sum', 'avg', 'min', 'max'] as const;
type AggregateFunction = (typeof FUNCTIONS)[number];

interface GroupParams {
  keys: string[];
  aggregations: { column?: string; fn: AggregateFunction; as: string }[];
}

const NUMERIC: DataColumnType[] = ['integer', 'number'];

/** `group`: one row per distinct key, with the aggregations of its rows. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<GroupParams>({
        id: 'group',
        description: 'One row per distinct combination of the keys (one row in all without keys), with aggregations of its rows: count (column optional: rows), count_distinct, sum, avg, min, max',
        params: {
          type: 'object',
          properties: {
            keys: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 100, uniqueItems: true, default: [] },
            aggregations: {
              type: 'array',
              minItems: 1,
              maxItems: 1000,
              items: {
                type: 'object',
                properties: { column: { type: 'string', minLength: 1 }, fn: { enum: [...FUNCTIONS] }, as: { type: 'string', minLength: 1, maxLength: 63 } },
                required: ['fn', 'as'],
                additionalProperties: false,
              },
            },
          },
          required: ['aggregations'],
          additionalProperties: false,
        },
        inputs: { min: 1, max: 1 },
        plan: ({ params, inputs: [input] }) => {
          const keys = (params.keys ?? []).map((name, i) => columnOf(input, name, `keys.${i}`));
          const aggregations = params.aggregations.map((aggregation, i) => {
            const where = `aggregations.${i}`;
            if (!aggregation.column && aggregation.fn !== 'count') throw problems.badRequest(`${aggregation.fn} needs a column`, [{ path: `body.params.${where}.column`, message: 'required for this function' }]);
            const source = aggregation.column ? columnOf(input, aggregation.column, `${where}.column`) : null;
            if (source && (aggregation.fn === 'sum' || aggregation.fn === 'avg') && !NUMERIC.includes(source.type)) {
              throw problems.badRequest(`${aggregation.fn} needs a numeric column; "${source.name}" is ${source.type}`, [{ path: `body.params.${where}.column`, message: `not numeric (${source.type})` }]);
            }
            return { name: outputName(aggregation.as, `${where}.as`), type: resultType(aggregation.fn, source?.type), expression: aggregate(aggregation.fn, source?.name), origin: { from: source ? [{ input: 0, column: source.name }] : [], transformation: 'aggregated' as const } };
          });
          const columns = [...keys.map((k) => ({ ...k, origin: identity(0, k.name), expression: sql.id(k.name) as RawBuilder<unknown> })), ...aggregations];
          uniqueNames(columns, 'aggregations');
          const list = sql.join(columns.map((c) => sql`${c.expression} as ${sql.id(c.name)}`));
          const groupBy = keys.length ? sql` group by ${sql.join(keys.map((k) => sql.id(k.name)))}` : sql``;
          return [{ select: sql`select ${list} from ${tableOf(input)}${groupBy}`, columns: columns.map(({ expression: _, ...column }) => column) }];
        },
      }),
    ),
});

function aggregate(fn: AggregateFunction, column: string | undefined): RawBuilder<unknown> {
  if (!column) return sql`count(*)`;
  const ref = sql.id(column);
  return fn === 'count_distinct' ? sql`count(distinct ${ref})` : sql`${sql.raw(fn)}(${ref})`;
}

function resultType(fn: AggregateFunction, source: DataColumnType | undefined): DataColumnType {
  if (fn === 'count' || fn === 'count_distinct') return 'integer';
  if (fn === 'avg') return 'number';
  return source!;
}
