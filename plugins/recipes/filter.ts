import { sql } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { passThrough, selectList, tableOf } from './columns.ts';
import { conditionsParams, combined } from './conditions.ts';

/** `filter`: the input's rows that match the conditions (the `GET …/rows` filter language). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<{ conditions: string[]; combine?: 'and' | 'or' }>({
        id: 'filter',
        description: 'Keeps the rows that match conditions written as column:operator:value (the filter language of GET /api/datasets/{id}/rows), all of them (and) or any (or)',
        params: conditionsParams,
        inputs: { min: 1, max: 1 },
        plan: (context) => {
          const [input] = context.inputs;
          const columns = passThrough(input, 0);
          return [{ select: sql`select ${selectList(columns)} from ${tableOf(input)} where ${combined(context, input)}`, columns }];
        },
      }),
    ),
});
