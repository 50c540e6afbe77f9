import { sql } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { columnOf, passThrough, selectList, tableOf } from './columns.ts';

interface TopNParams {
  order_by: { column: string; direction?: 'asc' | 'desc' }[];
  limit: number;
}

/** `top_n`: the first `limit` rows in the order given (empty values last), written in that order. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<TopNParams>({
        id: 'top_n',
        description: 'Keeps the first `limit` rows in the order given by order_by (empty values last), in that order',
        params: {
          type: 'object',
          properties: {
            order_by: {
              type: 'array',
              minItems: 1,
              maxItems: 100,
              items: { type: 'object', properties: { column: { type: 'string', minLength: 1 }, direction: { enum: ['asc', 'desc'], default: 'asc' } }, required: ['column'], additionalProperties: false },
            },
            limit: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
          },
          required: ['order_by', 'limit'],
          additionalProperties: false,
        },
        inputs: { min: 1, max: 1 },
        plan: ({ params, inputs: [input] }) => {
          const order = params.order_by.map((term, i) => sql`${sql.id(columnOf(input, term.column, `order_by.${i}.column`).name)} ${sql.raw(term.direction === 'desc' ? 'desc' : 'asc')} nulls last`);
          const columns = passThrough(input, 0);
          return [{ select: sql`select ${selectList(columns)} from ${tableOf(input)} order by ${sql.join(order)} limit ${sql.lit(params.limit)}`, columns }];
        },
      }),
    ),
});
