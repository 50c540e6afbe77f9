import { sql } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { passThrough, selectList, tableOf } from './columns.ts';
import { combined, conditionsParams } from './conditions.ts';

/** `split`: the rows that match go to the first output, every other row (a condition unknown on it included) to the second. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<{ conditions: string[]; combine?: 'and' | 'or' }>({
        id: 'split',
        description: 'Splits the rows in two outputs: those that match the conditions, and the rest (rows where a condition is unknown, e.g. on null, go to the rest)',
        params: conditionsParams,
        inputs: { min: 1, max: 1 },
        outputs: 2,
        plan: (context) => {
          const [input] = context.inputs;
          const columns = passThrough(input, 0);
          const matches = sql`case when ${combined(context, input)} then 1 else 0 end`;
          const part = (value: number) => ({ select: sql`select ${selectList(columns)} from ${tableOf(input)} where ${matches} = ${sql.lit(value)}`, columns });
          return [part(1), part(0)];
        },
      }),
    ),
});
