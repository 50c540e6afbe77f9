import { sql } from 'kysely';
import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { selectList, tableOf } from './columns.ts';

/** `stack`: the rows of every input one after another (their columns must match by name and type). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<{ distinct?: boolean }>({
        id: 'stack',
        description: 'Stacks the rows of two or more inputs with the same columns (by name and type, in any order); distinct removes duplicate rows',
        params: { type: 'object', properties: { distinct: { type: 'boolean', default: false } }, additionalProperties: false },
        inputs: { min: 2 },
        plan: ({ params, inputs }) => {
          const [first, ...rest] = inputs;
          const signature = (columns: { name: string; type: string }[]) => columns.map((c) => `${c.name}:${c.type}`).sort().join(',');
          rest.forEach((input, i) => {
            if (signature(input.columns) !== signature(first.columns)) {
              throw problems.unprocessable(`dataset "${input.name}" does not have the columns of "${first.name}" (same names and types)`, [{ path: `body.inputs.${i + 1}`, message: 'columns differ from the first input' }]);
            }
          });
          const list = selectList(first.columns);
          const parts = inputs.map((input) => sql`select ${list} from ${tableOf(input)}`);
          const columns = first.columns.map((c) => ({ ...c, origin: { from: inputs.map((_, input) => ({ input, column: c.name })), transformation: 'identity' as const } }));
          return [{ select: sql.join(parts, sql.raw(params.distinct ? ' union ' : ' union all ')), columns }];
        },
      }),
    ),
});
