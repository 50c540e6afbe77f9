import { sql } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { columnOf, identity, selectList, tableOf } from './columns.ts';

/** `distinct`: one row per distinct combination of the columns named (all of them when absent). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<{ columns?: string[] }>({
        id: 'distinct',
        description: 'Removes duplicate rows: one row per distinct combination of the columns named (every column when omitted); the output has those columns',
        params: {
          type: 'object',
          properties: { columns: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1, maxItems: 1000, uniqueItems: true } },
          additionalProperties: false,
        },
        inputs: { min: 1, max: 1 },
        plan: ({ params, inputs: [input] }) => {
          const chosen = params.columns ? params.columns.map((name, i) => columnOf(input, name, `columns.${i}`)) : input.columns;
          const columns = chosen.map((c) => ({ ...c, origin: identity(0, c.name) }));
          return [{ select: sql`select distinct ${selectList(columns)} from ${tableOf(input)}`, columns }];
        },
      }),
    ),
});
